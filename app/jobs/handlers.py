"""Job functions. Each is thin: open a session, call the service that does the work, commit.

A function's name is its job name (SAQ registers functions and schedules crons by
`__qualname__`); `app.jobs.registry` pairs each with its `JobName` and options, and the
worker refuses to start if a pair disagrees.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from app.accounts import subscriptions
from app.accounts.token_refresh import refresh_expiring_tokens
from app.clicks import day_recount
from app.db.engine import autocommit
from app.db.models import TriggerKind
from app.delivery.intake import outbox
from app.delivery.recovery import inbox_check, next_post, reconcile, sweeps
from app.delivery.send import pacer
from app.delivery.send.dispatch import deliver
from app.heartbeat import live_heartbeats
from app.instruments import INBOX_CHECKS
from app.jobs.context import runtime_of
from app.maintenance import retention
from app.queue import JobName

logger = logging.getLogger("oncereply.worker")


async def purge_expired(ctx: dict[str, Any]) -> dict[str, int]:
    resources = runtime_of(ctx).resources
    async with resources.sessionmaker() as session, session.begin():
        purged = await retention.purge_expired(session)
    if purged.idempotency_keys or purged.webhook_events:
        logger.info(
            "purged %d expired idempotency keys and %d old webhook events",
            purged.idempotency_keys,
            purged.webhook_events,
        )
    return {
        "idempotency_keys": purged.idempotency_keys,
        "webhook_events": purged.webhook_events,
        "idempotency_hits": purged.idempotency_hits,
        "link_click_day_people": purged.link_click_day_people,
        "link_click_days": purged.link_click_days,
        "link_click_quarters": purged.link_click_quarters,
    }


async def recount_click_days(
    ctx: dict[str, Any], *, workspace_id: int | None = None
) -> dict[str, int]:
    """One workspace's days after its change of zone; as the cron, every workspace waiting."""
    resources = runtime_of(ctx).resources
    if workspace_id is None:
        async with resources.sessionmaker() as session:
            due = await day_recount.recounts_due(session)
    else:
        due = [workspace_id]
    recounted = 0
    for one in due:
        async with resources.sessionmaker() as session, session.begin():
            recounted += await day_recount.recount_click_days(session, one)
    return {"recounted": recounted}


async def ingest_event(ctx: dict[str, Any], *, event_ids: list[int]) -> dict[str, Any]:
    return await outbox.run_ingest(runtime_of(ctx).resources, event_ids)


async def outbox_relay(ctx: dict[str, Any]) -> dict[str, int]:
    return {"enqueued": await outbox.relay_outbox(runtime_of(ctx).resources)}


async def _deliver(
    ctx: dict[str, Any],
    dm_log_id: int,
    kind: TriggerKind,
    grant: int | None = None,
    public_grant: int | None = None,
) -> dict[str, object]:
    runtime = runtime_of(ctx)
    report = await deliver(
        runtime.resources,
        worker_id=runtime.worker_id,
        dm_log_id=dm_log_id,
        kind=kind,
        grant=grant,
        public_grant=public_grant,
    )
    return report.as_dict()


async def process_comment(
    ctx: dict[str, Any],
    *,
    dm_log_id: int,
    grant: int | None = None,
    public_grant: int | None = None,
) -> dict[str, object]:
    return await _deliver(ctx, dm_log_id, TriggerKind.COMMENT, grant, public_grant)


async def pace_account(ctx: dict[str, Any], *, account_id: int) -> dict[str, object]:
    return (await pacer.pace_account(runtime_of(ctx).resources, account_id)).as_dict()


async def process_postback(ctx: dict[str, Any], *, dm_log_id: int) -> dict[str, object]:
    return await _deliver(ctx, dm_log_id, TriggerKind.POSTBACK)


async def process_message(ctx: dict[str, Any], *, dm_log_id: int) -> dict[str, object]:
    return await _deliver(ctx, dm_log_id, TriggerKind.MESSAGE)


async def send_follow_up(ctx: dict[str, Any], *, dm_log_id: int) -> dict[str, object]:
    return await _deliver(ctx, dm_log_id, TriggerKind.FOLLOW_UP)


async def verify_unconfirmed(ctx: dict[str, Any], *, dm_log_id: int) -> dict[str, str]:
    result = await inbox_check.verify_unconfirmed(runtime_of(ctx).resources, dm_log_id)
    INBOX_CHECKS.labels(result.status).inc()
    return {"status": result.status, "detail": result.detail}


# The jobs that claim a leg and send it: a claim of a live worker is its job's until the
# longest of their timeouts has passed.
_SENDING_JOBS = (
    JobName.PROCESS_COMMENT,
    JobName.PROCESS_POSTBACK,
    JobName.PROCESS_MESSAGE,
    JobName.SEND_FOLLOW_UP,
)
# Past its timeout SAQ cancels a job, and gives the cancellation a hard deadline (2 s,
# worker/runner.py); a little more for the worker's loop to get there on a loaded machine.
_CANCEL_GRACE_S = 5.0


async def sweep_stale_claims(ctx: dict[str, Any]) -> dict[str, int]:
    resources = runtime_of(ctx).resources
    send_timeout_s = resources.settings.send_timeout_s
    older = sweeps.stale_after_s(send_timeout_s)
    queue = resources.queue
    held_s = max(
        (
            queue.options[name.value].timeout_for(queue.send_timeout_s)
            for name in _SENDING_JOBS
            if name.value in queue.options
        ),
        default=0,
    )
    alive = [beat.worker_id for beat in await live_heartbeats(resources.redis, time.time())]
    async with autocommit(resources.engine) as conn:
        swept = await sweeps.sweep_stale_claims(
            conn,
            resources.queue,
            older_than_s=older,
            unsent_older_than_s=sweeps.unsent_after_s(send_timeout_s),
            alive=alive,
            # A cancelled job may take the cancellation's hard deadline to let go.
            held_s=held_s + _CANCEL_GRACE_S,
        )
    return {
        "private": len(swept.private),
        "public": len(swept.public),
        "resent": len(swept.resent),
    }


async def relay_due_work(ctx: dict[str, Any]) -> dict[str, int]:
    resources = runtime_of(ctx).resources
    async with autocommit(resources.engine) as conn:
        relayed = await sweeps.relay_due_work(conn, resources.queue)
    return {
        "resumed_accounts": relayed.resumed_accounts,
        "expired": relayed.expired,
        "enqueued": relayed.enqueued,
        "paced_accounts": relayed.paced_accounts,
        "checks": relayed.checks,
    }


async def refresh_tokens(ctx: dict[str, Any]) -> dict[str, int]:
    resources = runtime_of(ctx).resources
    async with resources.sessionmaker() as session:
        return await refresh_expiring_tokens(session, resources.cipher, resources.graph)


async def reconcile_comments(ctx: dict[str, Any]) -> dict[str, int]:
    """Cron tick: enqueue a sweep for each account due one (RECONCILE_INTERVAL_S)."""
    return {"enqueued": await reconcile.enqueue_due_sweeps(runtime_of(ctx).resources)}


async def reconcile_account(ctx: dict[str, Any], *, account_id: int) -> dict[str, Any]:
    report = await reconcile.reconcile_account(runtime_of(ctx).resources, account_id)
    return report.as_dict()


async def bind_next_posts(ctx: dict[str, Any], *, account_id: int | None = None) -> dict[str, Any]:
    report = await next_post.bind_next_posts(runtime_of(ctx).resources, account_id=account_id)
    return report.as_dict()


async def check_webhook_subscriptions(
    ctx: dict[str, Any], *, account_id: int | None = None, force: bool = False
) -> dict[str, Any]:
    report = await subscriptions.check_subscriptions(
        runtime_of(ctx).resources, account_id=account_id, force=force
    )
    return report.as_dict()
