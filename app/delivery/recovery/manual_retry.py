"""A creator's "Retry" on a FAILED or UNCONFIRMED private reply or DM.

Any kind of row: a comment's private reply (within its 7 days), a tap's or a DM trigger's DM,
a follow-up (within the 24-hour window the person opened). A retried tap decides its message
anew (the person may have followed since); a retried follow-up sends its frozen text.

One conditional UPDATE moves the leg back to PENDING and grants a fresh budget of three
attempts by raising `pr_attempt_limit` (the claim still bounds every send). An UNCONFIRMED
leg is only retried with explicit confirmation, since the first message may have arrived.
The retry is noted in `pr_evidence.manual_retry` with the state it came from. If Meta then
answers 100/2534025 inside the 7-day window, an earlier send is recorded as having arrived
only when an earlier attempt's answer was ambiguous (see `app.delivery.send.outcomes`).

`mark_retry` is the state change alone, in the caller's transaction: the dashboard runs it
inside an idempotency key's transaction (`app.operations.idempotency.run_once`), so the new
state and the key's stored answer commit together, and enqueues only after that commit.
`request_retry` is the whole thing for other callers: mark, commit, enqueue. Either way the
job never sees the old state, and if the enqueue never happens (Redis down, a crash right
after the commit) the row is still PENDING and due: the due-work relay picks it up.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum

from saq import Queue
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import LegState, TriggerKind
from app.delivery.send.outcomes import ATTEMPT_BUDGET
from app.delivery.send.scheduling import enqueue_delivery


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
    due: datetime | None = None  # QUEUED: when the delivery job should run
    kind: TriggerKind = TriggerKind.COMMENT  # QUEUED: the row's kind (which job to enqueue)


_RETRY = text(
    f"""
UPDATE dm_logs SET
    pr_state = 'PENDING',
    pr_attempt_limit = pr_attempts + {ATTEMPT_BUDGET},
    pr_next_attempt_at = now(),
    pr_error_message = NULL,
    -- The old refusal stays in the timeline's calls; the row no longer shows it.
    pr_error_code = NULL,
    pr_error_subcode = NULL,
    pr_evidence = COALESCE(pr_evidence, '{{}}'::jsonb) || jsonb_build_object(
        'manual_retry', jsonb_build_object(
            'at', now(), 'from_state', pr_state, 'attempts_before', pr_attempts)),
    updated_at = now()
WHERE id = :id AND workspace_id = :workspace_id
  AND (pr_state = 'FAILED' OR (pr_state = 'UNCONFIRMED' AND :confirmed))
  AND (deadline_at IS NULL OR deadline_at > now())
RETURNING pr_next_attempt_at, trigger_kind
"""  # noqa: S608 - the only interpolation is a module constant
)
_STATE = text(
    "SELECT pr_state, deadline_at <= now() AS expired, trigger_kind FROM dm_logs "
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
    """Mark the retry, commit, then enqueue the delivery job."""
    result = await mark_retry(
        session,
        workspace_id=workspace_id,
        dm_log_id=dm_log_id,
        confirm_unconfirmed=confirm_unconfirmed,
    )
    await session.commit()
    if result.status is not RetryStatus.QUEUED:
        return result
    enqueued = await enqueue_delivery(queue, dm_log_id, result.due, kind=result.kind)
    return replace(result, enqueued=enqueued)


async def mark_retry(
    session: AsyncSession,
    *,
    workspace_id: int,
    dm_log_id: int,
    confirm_unconfirmed: bool,
) -> RetryResult:
    """Move the leg back to PENDING (one conditional UPDATE) or say why not. Does not commit:
    the caller commits, then enqueues `enqueue_delivery(queue, dm_log_id, result.due,
    kind=result.kind)` (any delivery job would run the row through its own flow; the kind
    names the job the queue shows)."""
    params = {"id": dm_log_id, "workspace_id": workspace_id}
    row = (await session.execute(_RETRY, {**params, "confirmed": confirm_unconfirmed})).first()
    if row is not None:
        return RetryResult(
            RetryStatus.QUEUED,
            LegState.PENDING,
            "The DM will be sent again shortly.",
            due=row.pr_next_attempt_at,
            kind=TriggerKind(row.trigger_kind),
        )
    current = (await session.execute(_STATE, params)).first()
    if current is None:
        return RetryResult(RetryStatus.NOT_FOUND, None, "No such delivery in this workspace.")
    state, expired = LegState(current.pr_state), bool(current.expired)
    if expired and state in (LegState.FAILED, LegState.UNCONFIRMED):
        if current.trigger_kind == TriggerKind.COMMENT:
            why = "The comment is more than 7 days old; Instagram no longer allows a private reply."
        else:
            why = (
                "The 24-hour messaging window has closed; Instagram allows no DM until the "
                "person writes or taps again."
            )
        return RetryResult(RetryStatus.NOT_RETRYABLE, state, why)
    if state is LegState.UNCONFIRMED:
        return RetryResult(
            RetryStatus.NEEDS_CONFIRMATION,
            state,
            "This DM may already have arrived. Check the conversation, then confirm the retry.",
        )
    return RetryResult(
        RetryStatus.NOT_RETRYABLE, state, f"A delivery in state {state.value} cannot be retried."
    )
