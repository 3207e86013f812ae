"""One comment, every way it can arrive more than once, through real processes: the sandbox
POSTs its signed webhook three times to a real web process, a real worker ingests and
delivers, then the reconciler sweeps the account and re-enqueues the delivery as a poll would.
The fan gets one DM, and Instagram sees one send request."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from saq import Status
from sqlalchemy import select

from app.db.models import LegState, WebhookEvent, WebhookStatus
from app.delivery.recovery.reconcile import reconcile_account
from app.queue import JobName, enqueue
from tests.integration.delivery.conftest import LEMON_REEL, World
from tests.integration.delivery.polling import activated_minutes_ago, ledger, logs
from tests.support.processes import free_port, start_web, start_worker

# The sandbox signs with its own default secret; this web process checks that one.
SANDBOX_SECRET = "sandbox-instagram-app-secret"


async def _eventually(
    check: Callable[[], Awaitable[bool]], *, within_s: float, what: Callable[[], object]
) -> None:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if await check():
            return
        await asyncio.sleep(0.2)
    raise TimeoutError(f"gave up after {within_s:g} s waiting: {what()}")


async def test_three_webhook_deliveries_and_a_reconciler_give_one_dm(
    world: World, delivery_env: dict[str, str], artifacts_dir: Path
) -> None:
    admin = world.admin
    # The reconciler reads back to one minute ago: the sandbox's older comments stay out.
    await activated_minutes_ago(world, world.campaign_id, 1)
    port = free_port()
    env = {**delivery_env, "INSTAGRAM_APP_SECRET": SANDBOX_SECRET}
    log_dir = artifacts_dir / "duplicate-arrivals"
    web = start_web(env, port, log_dir)
    worker = start_worker(env, log_dir, "duplicate-arrivals-worker")
    try:
        admin.update_settings(require_subscription=False)
        registered = admin.register_webhook(
            f"http://127.0.0.1:{port}/webhooks/instagram", env["WEBHOOK_VERIFY_TOKEN"]
        )
        assert registered["verified"], registered
        admin.add_fault("webhook", "duplicate", count=3)
        comment_id = admin.fan_comment("jane.doe", LEMON_REEL, "RECIPE please")["id"]

        seen: dict[str, object] = {}

        async def delivered_and_ingested() -> bool:
            answered = [a["status"] for a in admin.webhook_attempts()]
            async with world.resources.sessionmaker() as session:
                statuses = (await session.scalars(select(WebhookEvent.status))).all()
            rows = [row.pr_state for row in await logs(world)]
            seen.update(webhooks=answered, events=statuses, rows=rows)
            return (
                answered.count(200) >= 3
                and len(statuses) >= 3  # each POST is stored, duplicates too
                and all(s is WebhookStatus.PROCESSED for s in statuses)
                and rows == [LegState.SENT]
            )

        await _eventually(delivered_and_ingested, within_s=60, what=lambda: seen)

        # The reconciler finds the comment on the post and, it being in the ledger, leaves it.
        sweep = await reconcile_account(world.resources, world.account_id, force=True)
        assert (sweep.recovered, sweep.errors, sweep.stopped) == (0, [], None)
        assert sweep.comments_seen >= 1
        # A poll's re-enqueue carries no deterministic job key, so it is not coalesced with
        # the finished job: the worker runs the delivery again.
        [row] = await logs(world)
        job = await enqueue(world.resources.queue, JobName.PROCESS_COMMENT, dm_log_id=row.id)
        assert job is not None
        await job.refresh(until_complete=30)
        assert job.status is Status.COMPLETE, job
    finally:
        worker.stop()
        web.stop()
        admin.unregister_webhook()

    # One ledger entry and one delivery row, whichever of the paths wrote first.
    [entry] = await ledger(world)
    assert entry.comment_id == comment_id
    [row] = await logs(world)
    assert row.pr_state is LegState.SENT
    assert len(world.inbox("jane.doe")) == 1
    stats = world.stats(comment_id)
    assert stats["send_requests"] == 1
    assert stats["private_replies_delivered"] == 1
