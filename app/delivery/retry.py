"""A creator's "Retry" on a FAILED or UNCONFIRMED private reply (DESIGN §4.7, §7).

One conditional UPDATE moves the leg back to PENDING and grants a fresh budget of three
attempts by raising `pr_attempt_limit` (the claim still bounds every send). An UNCONFIRMED
leg is only retried with explicit confirmation, since the first message may have arrived.
The retry is noted in `pr_evidence.manual_retry` with the state it came from: if Meta then
answers 100/2534025 inside the 7-day window, the first send is recorded as having arrived.

The function commits the session before enqueueing, so the job never sees the old state.
If the enqueue fails (Redis down) the row is still PENDING and due: the relay picks it up.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from saq import Queue
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import LegState
from app.delivery.outcomes import ATTEMPT_BUDGET
from app.delivery.scheduling import enqueue_delivery


class RetryStatus(StrEnum):
    QUEUED = "queued"
    NEEDS_CONFIRMATION = "needs_confirmation"
    NOT_RETRYABLE = "not_retryable"
    NOT_FOUND = "not_found"


@dataclass(frozen=True, slots=True)
class RetryResult:
    status: RetryStatus
    state: LegState | None  # the private-reply state after the call
    message: str  # a sentence for the creator
    enqueued: bool = False


_RETRY = text(
    f"""
UPDATE dm_logs SET
    pr_state = 'PENDING',
    pr_attempt_limit = pr_attempts + {ATTEMPT_BUDGET},
    pr_next_attempt_at = now(),
    pr_error_message = NULL,
    pr_evidence = COALESCE(pr_evidence, '{{}}'::jsonb) || jsonb_build_object(
        'manual_retry', jsonb_build_object(
            'at', now(), 'from_state', pr_state, 'attempts_before', pr_attempts)),
    updated_at = now()
WHERE id = :id AND workspace_id = :workspace_id AND trigger_kind = 'comment'
  AND (pr_state = 'FAILED' OR (pr_state = 'UNCONFIRMED' AND :confirmed))
  AND (deadline_at IS NULL OR deadline_at > now())
RETURNING pr_next_attempt_at
"""  # noqa: S608 - the only interpolation is a module constant
)
_STATE = text(
    "SELECT pr_state, deadline_at <= now() FROM dm_logs "
    "WHERE id = :id AND workspace_id = :workspace_id"
)


async def request_retry(
    session: AsyncSession,
    queue: Queue,
    *,
    workspace_id: int,
    dm_log_id: int,
    confirm_unconfirmed: bool,
) -> RetryResult:
    params = {"id": dm_log_id, "workspace_id": workspace_id}
    row = (await session.execute(_RETRY, {**params, "confirmed": confirm_unconfirmed})).first()
    if row is not None:
        await session.commit()
        enqueued = await enqueue_delivery(queue, dm_log_id, row[0])
        return RetryResult(
            RetryStatus.QUEUED, LegState.PENDING, "The DM will be sent again shortly.", enqueued
        )
    current = (await session.execute(_STATE, params)).first()
    await session.commit()
    if current is None:
        return RetryResult(RetryStatus.NOT_FOUND, None, "No such delivery in this workspace.")
    state, expired = LegState(current[0]), bool(current[1])
    if expired and state in (LegState.FAILED, LegState.UNCONFIRMED):
        return RetryResult(
            RetryStatus.NOT_RETRYABLE,
            state,
            "The comment is more than 7 days old; Instagram no longer allows a private reply.",
        )
    if state is LegState.UNCONFIRMED:
        return RetryResult(
            RetryStatus.NEEDS_CONFIRMATION,
            state,
            "This DM may already have arrived. Check the conversation, then confirm the retry.",
        )
    return RetryResult(
        RetryStatus.NOT_RETRYABLE, state, f"A delivery in state {state.value} cannot be retried."
    )
