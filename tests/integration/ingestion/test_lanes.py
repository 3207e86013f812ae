"""Ingest keeps up whatever the backlog: a real worker process takes an ingest job at once
although tens of thousands of delivery jobs wait ahead of it, because ingest runs in the
control lane, a queue of its own with slots of its own in every worker."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from sqlalchemy import func, select

from app.db.models import Comment
from app.queue import JobName, Lane, enqueue, enqueue_many, lane_queue_name
from app.resources import Resources
from tests.support.processes import start_worker
from tests.support.webhooks import comment_value, comments_body, seed_account, seed_campaign
from tests.support.webhooks import store_event as store_webhook_event

BACKLOG = 20_000
# Ids no dm_logs row has: each delivery job finds nothing and ends, as fast as a job can.
MISSING_ROW = 10**12


async def _comments(resources: Resources) -> int:
    async with resources.sessionmaker() as session:
        return int((await session.execute(select(func.count()).select_from(Comment))).scalar_one())


def test_every_lane_has_a_queue_of_its_own(resources: Resources) -> None:
    names = {queue.lane: queue.name for queue in resources.queue.lanes}
    assert names == {Lane.WORK: "delivery", Lane.CONTROL: "delivery-control"}
    assert names[Lane.CONTROL] == lane_queue_name(resources.settings.queue_name, Lane.CONTROL)
    assert resources.queue.lane_for(JobName.INGEST_EVENT).lane is Lane.CONTROL
    assert resources.queue.lane_for(JobName.PACE_ACCOUNT).lane is Lane.CONTROL
    assert resources.queue.lane_for(JobName.PROCESS_COMMENT).lane is Lane.WORK


async def test_a_deep_delivery_backlog_does_not_delay_an_ingest_job(
    resources: Resources, test_env: dict[str, str], artifacts_dir: Path
) -> None:
    async with resources.sessionmaker() as session, session.begin():
        await seed_campaign(session, await seed_account(session))
    backlog = [
        (f"deliver:{MISSING_ROW + n}", {"dm_log_id": MISSING_ROW + n}) for n in range(BACKLOG)
    ]
    assert await enqueue_many(resources.queue, JobName.PROCESS_COMMENT, backlog) == BACKLOG
    async with resources.sessionmaker() as session, session.begin():
        event_id = await store_webhook_event(
            session, comments_body(comment_value("17870000000000777"))
        )
    # Enqueued after the whole backlog, as the web enqueues a webhook's ingest.
    await enqueue(
        resources.queue, JobName.INGEST_EVENT, key=f"ingest:{event_id}", event_ids=[event_id]
    )
    work = resources.queue.of_lane(Lane.WORK)

    worker = start_worker(test_env, artifacts_dir, "lanes-worker")
    try:
        deadline = time.monotonic() + 120
        while await _comments(resources) == 0:
            assert worker.running, worker.output()[-3000:]
            assert time.monotonic() < deadline, "the ingest job did not run within 120 s"
            await asyncio.sleep(0.05)
        waiting = await work.count("queued")
        # The same worker drains the work lane too.
        while await work.count("queued") == BACKLOG:
            assert time.monotonic() < deadline, "the worker took no delivery job within 120 s"
            await asyncio.sleep(0.05)
    finally:
        worker.stop()
    # In one first-in-first-out queue the ingest job would have waited for all of them.
    assert waiting >= BACKLOG // 2, f"only {waiting} of {BACKLOG} deliveries were still waiting"
