"""From a classified answer to the leg's next state, as pure functions.

- sent → SENT with the message id;
- retryable (but see the pace below) → back to PENDING, next try 5 minutes after the first
  attempt and 15 after the second (or when Meta says access returns, if later); FAILED when
  the third, the last of the budget, fails too;
- account-level waits (368 pause, 190 token) → PENDING until the account can send again, and
  the attempt is given back to the budget: nothing was delivered and the fault is the
  account's, not this message's; the 7-day deadline still bounds the wait;
- a comment's private reply refused for the account's pace (rate-limit codes 4, 17, 32, 613,
  80002) → PENDING, the attempt given back likewise, waiting for the account's pacer (no
  fixed retry time: the pacer grants it, earliest deadline first, at the pace Meta's answers
  set, `throttle`); its 7-day deadline bounds the wait;
- rejected → its final state (FAILED, SKIPPED_WINDOW_EXPIRED), the person claim freed;
- ambiguous → UNCONFIRMED, never sent again automatically.

Definite answers give the quota back; ambiguous ones keep it. A retry of a comment's private
reply answered by 100/2534025 inside the 7-day window is Meta saying an earlier send arrived
only if an earlier attempt was ambiguous (it may have been delivered): then it is recorded as
SENT with how that was learnt. Otherwise nothing we sent can have arrived — Meta gives the same
answer for a comment that is too old or cannot take a private reply — and it is FAILED with
Meta's reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from app.db.models import AttemptClass, LegState
from app.delivery.send.legs import CallReport, LegUpdate
from app.instagram.classify import Verdict

# 3 attempts, the second 5 minutes after the first and the third 15 after the second.
ATTEMPT_BUDGET = 3
RETRY_DELAYS = (timedelta(minutes=5), timedelta(minutes=15))
TOKEN_RETRY_DELAY = timedelta(seconds=30)
PACED_RETRY = "waiting to be sent again at the pace Instagram allows this account"


@dataclass(frozen=True, slots=True)
class AttemptContext:
    """What deciding a private reply's next state needs to know about its claim."""

    attempt_no: int
    attempt_limit: int
    now: datetime
    deadline_at: datetime | None
    quota_month: date | None = None
    # An earlier attempt of this leg ended ambiguous (its request may have been delivered):
    # only then can "already has its private reply" be our own earlier send.
    earlier_ambiguous: bool = False
    # A comment's private reply: the account's pacer can hand it a slot again.
    paced: bool = False


def retry_delay(attempt_no: int, attempt_limit: int) -> timedelta:
    """The wait after a failed attempt that is not the budget's last: 5 minutes after the
    first, 15 after the second, by its place in its budget (a manual retry starts anew)."""
    place = attempt_no - (attempt_limit - ATTEMPT_BUDGET)
    return RETRY_DELAYS[min(max(place, 1), len(RETRY_DELAYS)) - 1]


def call_report(verdict: Verdict | None, latency_ms: int) -> CallReport:
    if verdict is None:
        return CallReport(AttemptClass.SENT, latency_ms, http_status=200)
    return CallReport(
        verdict.outcome,
        latency_ms,
        http_status=verdict.http_status,
        code=verdict.code,
        subcode=verdict.subcode,
        fbtrace_id=verdict.fbtrace_id,
        error=(f"{verdict.reason}: {verdict.message}" if verdict.message else verdict.reason)[
            :2000
        ],
    )


def sent_update(message_id: str) -> LegUpdate:
    return LegUpdate(LegState.SENT, message_id=message_id)


def failure_update(
    verdict: Verdict,
    ctx: AttemptContext,
    *,
    account_wait_until: datetime | None = None,
    private: bool = True,
) -> LegUpdate:
    """The leg's next state after a failed call (see the module docstring)."""
    quota_back = ctx.quota_month if private else None
    if verdict.outcome is AttemptClass.AMBIGUOUS:
        return _update(verdict, LegState.UNCONFIRMED)
    if (
        private
        and verdict.comment_already_used
        and ctx.earlier_ambiguous
        and (ctx.deadline_at is None or ctx.now < ctx.deadline_at)
    ):
        evidence: dict[str, Any] = {
            "confirmed_by": "meta_already_used",
            "confirmed_at": ctx.now.isoformat(),
            "detail": "a retry was answered 100/2534025 (comment already used) inside the "
            "7-day window after an earlier send whose answer was lost: that send arrived",
        }
        # The first send's quota was kept; this retry's reservation goes back.
        return LegUpdate(LegState.SENT, evidence=evidence, release_quota_month=quota_back)
    if verdict.outcome is AttemptClass.REJECTED:
        return _update(
            verdict,
            verdict.final_state or LegState.FAILED,
            release_quota_month=quota_back,
            release_person=private,
        )
    if ctx.paced and verdict.pace_limited:
        # The account's pace, not this message: the attempt is given back and the row waits
        # for the account's pacer, which grants it at the pace Meta's answer set (after the
        # wait Meta stated, if any), earliest deadline first.
        wait = verdict.retry_after_s
        return LegUpdate(
            LegState.PENDING,
            next_attempt_at=ctx.now + timedelta(seconds=wait) if wait else None,
            refund_attempt=True,
            error_code=verdict.code,
            error_subcode=verdict.subcode,
            error_message=f"{verdict.reason}: {PACED_RETRY}",
            release_quota_month=quota_back,
            to_pacer=True,
        )
    if verdict.account_action is not None:
        wait_until = account_wait_until or ctx.now + TOKEN_RETRY_DELAY
        return _update(
            verdict,
            LegState.PENDING,
            next_attempt_at=wait_until,
            refund_attempt=True,
            release_quota_month=quota_back,
        )
    if ctx.attempt_no >= ctx.attempt_limit:
        return LegUpdate(
            LegState.FAILED,
            release_quota_month=quota_back,
            release_person=private,
            error_code=verdict.code,
            error_subcode=verdict.subcode,
            error_message=f"gave up after {ctx.attempt_no} attempts: {verdict.reason}",
        )
    delay = retry_delay(ctx.attempt_no, ctx.attempt_limit)
    if verdict.retry_after_s is not None:
        delay = max(delay, timedelta(seconds=verdict.retry_after_s))
    return _update(
        verdict, LegState.PENDING, next_attempt_at=ctx.now + delay, release_quota_month=quota_back
    )


def _update(
    verdict: Verdict,
    state: LegState,
    *,
    next_attempt_at: datetime | None = None,
    refund_attempt: bool = False,
    release_quota_month: date | None = None,
    release_person: bool = False,
) -> LegUpdate:
    return LegUpdate(
        state,
        next_attempt_at=next_attempt_at,
        refund_attempt=refund_attempt,
        error_code=verdict.code,
        error_subcode=verdict.subcode,
        error_message=verdict.reason,
        release_quota_month=release_quota_month,
        release_person=release_person,
    )
