"""The webhook outbox in the worker: ingesting stored events, and relaying forgotten ones.

`run_ingest` is the `ingest_event` job: one transaction for its events (`ingest.ingest_events`),
commit, then one delivery job per new `dm_logs` row. A database or network failure (a
PostgreSQL restart, a dropped connection, Redis gone) is raised so SAQ retries the job later.
Any other failure is treated as a poison event: the events are retried one by one, and an
event that still fails alone is marked `rejected` with the error and reported, so one bad
body can neither block the others nor loop forever.

``redrive_failed` puts events set aside by a failed ingest back in the outbox once the bug is
fixed (`python -m app redrive-webhooks`); the relay then ingests them like new ones.

`relay_outbox` is the cron that makes "Redis was down" harmless: events still `received` a
while after they arrived (the web could not enqueue their job, or died first) are enqueued,
and events `enqueued` long ago whose job never ran (lost with Redis) are enqueued again; the
web's intake and the relay both stamp `relayed_at` when they enqueue. An event `enqueued` 30 s
ago (`RELAY_ORPHANED_AFTER`) whose ingest job is no longer queued, running or scheduled
(its job ran and left it: a run beside another skips the events the other holds, and the other
may then have been cut short) is relayed at once rather than after `RELAY_AGAIN_AFTER`. Jobs
are keyed by their events, ingest skips events already processed or being processed, so a
relayed event that was in fact queued costs one no-op job at most.
"""

from __future__ import annotations

import logging
from bisect import bisect_right
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import psycopg
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from sqlalchemy import func, text, update
from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import EventLevel, WebhookEvent, WebhookStatus
from app.db.raw import pipelined_transaction
from app.delivery.intake.ingest import EventsIngest, enqueue_ingested, ingest_events, pace_surges
from app.delivery.intake.webhook_writer import UNMARK_ENQUEUED, enqueue_ingest, ingest_key_range
from app.operations.alerts import record_throttled
from app.queue import JobName, JobQueue
from app.queue.saq_adapter import pending_job_keys
from app.resources import Resources

logger = logging.getLogger("oncereply.ingest")

# Younger events are still on their way through the web's own enqueue.
RELAY_MIN_AGE = timedelta(seconds=15)
# An enqueued event whose job has not run by then is relayed again (lost with Redis).
RELAY_AGAIN_AFTER = timedelta(minutes=10)
# An enqueued event still unprocessed this long after, whose job is no longer pending, is
# relayed again now: its job ran without it.
RELAY_ORPHANED_AFTER = timedelta(seconds=30)
RELAY_BATCH = 2_000

# Failures that say nothing about the events themselves: retry the job later. Ingest talks
# to psycopg directly (`app.db.raw`), so a server restart or a dropped connection arrives as
# psycopg's own error, not SQLAlchemy's wrapper.
TRANSIENT_ERRORS = (
    OperationalError,
    InterfaceError,
    psycopg.OperationalError,
    psycopg.InterfaceError,
    OSError,
    TimeoutError,
    RedisConnectionError,
    RedisTimeoutError,
)


# Marked and committed before the jobs are enqueued (as the web intake does): a job that ran
# while an uncommitted mark held the rows would skip them (ingest locks with SKIP LOCKED),
# and the mark would then keep the relay away for `again_after` from events nobody ingested.
# Rows a job is ingesting right now are skipped here too.
_CLAIM_FOR_RELAY = text(
    "UPDATE webhook_events SET status = 'enqueued', relayed_at = now() "
    "WHERE id IN (SELECT id FROM webhook_events "
    "WHERE status IN ('received', 'enqueued') AND received_at < now() - :min_age "
    "AND (relayed_at IS NULL OR relayed_at < now() - :again_after) "
    "ORDER BY id LIMIT :limit FOR UPDATE SKIP LOCKED) "
    "RETURNING id, octet_length(body)"
)


# Enqueued events waiting longer than a job normally takes to come (the candidates for the
# orphan pass); those past `again_after` are the claim's above.
_ORPHAN_CANDIDATES = text(
    "SELECT id FROM webhook_events WHERE status = 'enqueued' "
    "AND relayed_at < now() - :orphaned_after AND relayed_at >= now() - :again_after "
    "ORDER BY id LIMIT :limit"
)
# Claimed as the relay's claim does, only if still enqueued as read and not being ingested now.
_CLAIM_ORPHANS = text(
    "UPDATE webhook_events SET relayed_at = now() "
    "WHERE id IN (SELECT id FROM webhook_events WHERE id = ANY(CAST(:ids AS bigint[])) "
    "AND status = 'enqueued' AND relayed_at < now() - :orphaned_after "
    "FOR UPDATE SKIP LOCKED) "
    "RETURNING id, octet_length(body)"
)


async def relay_outbox(
    resources: Resources,
    *,
    min_age: timedelta = RELAY_MIN_AGE,
    again_after: timedelta = RELAY_AGAIN_AFTER,
    orphaned_after: timedelta = RELAY_ORPHANED_AFTER,
    limit: int = RELAY_BATCH,
) -> int:
    """Enqueue ingest jobs for stored events nobody is working on; returns how many events."""
    async with resources.engine.begin() as conn:
        claimed = (
            await conn.execute(
                _CLAIM_FOR_RELAY,
                {"min_age": min_age, "again_after": again_after, "limit": limit},
            )
        ).all()
    orphans = await _claim_orphans(resources, orphaned_after, again_after, limit)
    if not claimed and not orphans:
        return 0
    events = sorted({(int(event_id), int(size)) for event_id, size in [*claimed, *orphans]})
    try:
        await enqueue_ingest(resources.queue, events)
    except Exception:
        # Back to the relay's first pass, not its retry ten minutes on.
        async with resources.engine.begin() as conn:
            await conn.execute(UNMARK_ENQUEUED, {"ids": [event_id for event_id, _ in events]})
        raise
    logger.info("outbox relay enqueued %d stored webhook events", len(events))
    return len(events)


async def _claim_orphans(
    resources: Resources, orphaned_after: timedelta, again_after: timedelta, limit: int
) -> list[Any]:
    """Enqueued events waiting past `orphaned_after` whose ingest job is no longer pending.

    The events are read before the jobs: a job that finished in between has processed its
    events (the claim skips them) or left them, and one still running holds them (skipped).
    An id inside the range of a pending job's key counts as that job's: at worst it waits for
    `again_after`.
    """
    async with resources.engine.connect() as conn:
        candidates = [
            int(event_id)
            for (event_id,) in await conn.execute(
                _ORPHAN_CANDIDATES,
                {"orphaned_after": orphaned_after, "again_after": again_after, "limit": limit},
            )
        ]
    if not candidates:
        return []
    starts, ends = await _pending_ingest_ranges(resources.queue)
    # The last range starting at or before the id is the only one that can hold it.
    orphans = [e for e in candidates if (at := bisect_right(starts, e) - 1) < 0 or ends[at] < e]
    if not orphans:
        return []
    async with resources.engine.begin() as conn:
        claimed = (
            await conn.execute(_CLAIM_ORPHANS, {"ids": orphans, "orphaned_after": orphaned_after})
        ).all()
    if claimed:
        logger.warning(
            "%d webhook events were left by their ingest job; relaying them", len(claimed)
        )
    return list(claimed)


async def _pending_ingest_ranges(queue: JobQueue) -> tuple[list[int], list[int]]:
    """The event id ranges of the ingest jobs queued, running or scheduled now, merged where
    they overlap: their starts and their ends, both ascending."""
    keys = await pending_job_keys(queue.lane_for(JobName.INGEST_EVENT.value))
    ranges = [r for key in keys if (r := ingest_key_range(key)) is not None]
    starts: list[int] = []
    ends: list[int] = []
    for low, high in sorted(ranges):
        if ends and low <= ends[-1]:
            ends[-1] = max(ends[-1], high)
        else:
            starts.append(low)
            ends.append(high)
    return starts, ends


async def run_ingest(resources: Resources, event_ids: Sequence[int]) -> dict[str, Any]:
    """The `ingest_event` job; see the module docstring for how failures are handled."""
    try:
        outcomes = [await _ingest_and_commit(resources, event_ids)]
    except TRANSIENT_ERRORS:
        raise
    except Exception:
        logger.exception("ingest of events %s failed; retrying them one by one", event_ids)
        outcomes = []
        for event_id in event_ids:
            try:
                outcomes.append(await _ingest_and_commit(resources, [event_id]))
            except TRANSIENT_ERRORS:
                raise
            except Exception as exc:  # noqa: BLE001 - a poison event is rejected, not retried
                await _reject_poison(resources, event_id, exc)
    summary: dict[str, Any] = {}
    for outcome in outcomes:
        await _after_commit(resources, outcome)
        for key, value in outcome.summary().items():
            summary[key] = summary.get(key, 0) + value
    return summary


async def _ingest_and_commit(resources: Resources, event_ids: Sequence[int]) -> EventsIngest:
    async with pipelined_transaction(resources.engine) as db:
        return await ingest_events(db, event_ids)


async def _after_commit(resources: Resources, outcome: EventsIngest) -> None:
    if outcome.deliveries or outcome.dm_deliveries:
        try:
            await pace_surges(resources, outcome)
            await enqueue_ingested(resources.queue, outcome)
        except Exception as exc:  # noqa: BLE001 - rows are PENDING; the due-work relay enqueues
            logger.warning(
                "could not enqueue %d deliveries (the due-work relay will): %s",
                len(outcome.deliveries) + len(outcome.dm_deliveries),
                exc,
            )
    alerts: list[tuple[str, str, dict[str, Any], int]] = []
    if outcome.unknown_accounts:
        ids = ", ".join(sorted(outcome.unknown_accounts)[:10])
        alerts.append(
            (
                "webhook_unknown_account",
                f"webhook items for Instagram accounts not connected here: {ids}",
                {"items_per_account": dict(outcome.unknown_accounts.most_common(50))},
                1,
            )
        )
    if outcome.malformed:
        alerts.append(
            (
                "webhook_items_malformed",
                "webhook items that could not be parsed were skipped (see the events)",
                {"problems_per_event": {str(k): v for k, v in outcome.malformed.items()}},
                2,
            )
        )
    if outcome.rejected:
        alerts.append(
            (
                "webhook_event_rejected",
                "webhook events were rejected: " + "; ".join(outcome.rejected.values())[:300],
                {"events": {str(k): v for k, v in list(outcome.rejected.items())[:20]}},
                2,
            )
        )
    for kind, message, details, per_minute in alerts:
        await record_throttled(
            resources.sessionmaker,
            resources.redis,
            kind=kind,
            level=EventLevel.WARNING,
            message=message,
            details=details,
            per_minute=per_minute,
        )


INGEST_FAILED_PREFIX = "ingest failed:"


async def redrive_failed(session: AsyncSession, *, since: datetime | None = None) -> int:
    """Return events rejected by a failing ingest (not by their content) to `received`.

    Only rejections whose reason starts with `INGEST_FAILED_PREFIX` qualify: bodies refused
    for what they are (not JSON, unknown object) stay refused. The caller commits.
    """
    conditions = [
        WebhookEvent.status == WebhookStatus.REJECTED,
        WebhookEvent.reject_reason.startswith(INGEST_FAILED_PREFIX),
    ]
    if since is not None:
        conditions.append(WebhookEvent.received_at >= since)
    result = await session.execute(
        update(WebhookEvent)
        .where(*conditions)
        .values(status=WebhookStatus.RECEIVED, processed_at=None, relayed_at=None)
        .returning(WebhookEvent.id)
    )
    return len(result.all())


async def _reject_poison(resources: Resources, event_id: int, exc: Exception) -> None:
    reason = f"{INGEST_FAILED_PREFIX} {type(exc).__name__}: {exc}"[:500]
    logger.error("webhook event %d rejected: %s", event_id, reason)
    async with resources.sessionmaker() as session, session.begin():
        await session.execute(
            update(WebhookEvent)
            .where(
                WebhookEvent.id == event_id,
                WebhookEvent.status.in_([WebhookStatus.RECEIVED, WebhookStatus.ENQUEUED]),
            )
            .values(status=WebhookStatus.REJECTED, reject_reason=reason, processed_at=func.now())
        )
    await record_throttled(
        resources.sessionmaker,
        resources.redis,
        kind="webhook_ingest_failed",
        level=EventLevel.ERROR,
        message=f"webhook event {event_id} could not be ingested and was set aside: {reason}",
        details={"webhook_event_id": event_id},
        per_minute=5,
    )
