"""The delivery log's buttons as state changes: bulk retry and "check the conversation again".

Like `app.delivery.recovery.manual_retry.mark_retry` these only change rows, in the caller's
transaction (the idempotency key's, see `app.web.idempotency`); the caller enqueues the jobs
after the commit.
Each change is one conditional UPDATE per row, so a row that moved on meanwhile (already
retried, confirmed by the inbox check) is simply not touched.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from saq import Queue
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.delivery.recovery.manual_retry import RetryStatus, mark_retry
from app.delivery.send.scheduling import enqueue_delivery, enqueue_verification

MAX_BULK_RETRY = 100
# What "Retry selected" with no row ticked tells the creator.
NOTHING_SELECTED = "Tick the box at the start of each row to retry, then press Retry selected."

_REQUEST_CHECK = text(
    """
UPDATE dm_logs SET
    pr_evidence = COALESCE(pr_evidence, '{}'::jsonb) || jsonb_build_object(
        'check_requested', jsonb_build_object('at', now(), 'by', CAST(:by AS text))),
    updated_at = now()
WHERE id = :id AND workspace_id = :workspace_id AND pr_state = 'UNCONFIRMED'
RETURNING id
"""
)


async def mark_inbox_check(
    session: AsyncSession, *, workspace_id: int, dm_log_id: int, requested_by: str
) -> bool:
    """Note that the creator asked to look in the conversation again; False unless the
    private reply is (still) UNCONFIRMED."""
    row = (
        await session.execute(
            _REQUEST_CHECK, {"id": dm_log_id, "workspace_id": workspace_id, "by": requested_by}
        )
    ).first()
    return row is not None


async def enqueue_inbox_check(queue: Queue, dm_log_id: int) -> None:
    # Asked for by a person who is waiting: look now, not after the usual settling delay.
    await enqueue_verification(queue, dm_log_id, delay_s=0)


@dataclass(slots=True)
class BulkRetry:
    queued: dict[int, datetime | None] = field(default_factory=dict)  # row id → due
    refused: int = 0


async def mark_bulk_retry(
    session: AsyncSession, *, workspace_id: int, dm_log_ids: Sequence[int]
) -> BulkRetry:
    """Retry every selected FAILED row; UNCONFIRMED ones are refused here (they need the
    evidence and a confirmation, one by one), as are rows in any other state."""
    result = BulkRetry()
    for dm_log_id in sorted(set(dm_log_ids))[:MAX_BULK_RETRY]:
        one = await mark_retry(
            session, workspace_id=workspace_id, dm_log_id=dm_log_id, confirm_unconfirmed=False
        )
        if one.status is RetryStatus.QUEUED:
            result.queued[dm_log_id] = one.due
        else:
            result.refused += 1
    return result


async def enqueue_retries(queue: Queue, due: dict[int, datetime | None]) -> None:
    for dm_log_id, at in due.items():
        await enqueue_delivery(queue, dm_log_id, at)
