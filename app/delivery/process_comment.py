"""`process_comment`: one `dm_logs` row through the delivery protocol (DESIGN §4).

Order: load (row, campaign, account in one query) → checks (campaign active, account able to
send, deadline) → public-reply leg → private-reply leg: hourly slot (Redis) → one claim
statement (person, quota, leg, attempt row) → send → classify → one record statement → give
back the slot on a definite answer. Only the worker whose claim returned IN_FLIGHT calls Meta.

The job itself is never retried by SAQ: a later attempt is a new job scheduled at the leg's
`next_attempt_at` (see `scheduling`), and the due-work relay re-enqueues anything a lost job
left behind. Connections are returned to the pool while Meta is being called.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from redis.exceptions import RedisError
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection

from app.crypto import TokenDecryptError
from app.db.models import AttemptClass, InstagramAccount, Leg, LegState, TriggerKind
from app.delivery import accounts, claims
from app.delivery.claims import CallReport, Claim, Delivery, LegUpdate
from app.delivery.messages import OutgoingMessage, build_message, buttons_of, render, text_message
from app.delivery.outcomes import AttemptContext, call_report, failure_update, sent_update
from app.delivery.quota import usage_month
from app.delivery.rate_limit import BudgetFull, HourlyBudget, Slot
from app.delivery.scheduling import enqueue_delivery, enqueue_verification
from app.instagram.classify import AccountAction, Verdict, classify_error
from app.instagram.graph import GraphError
from app.instagram.tokens import MissingTokenError, open_access_token
from app.resources import Resources

logger = logging.getLogger("oncereply.delivery")

# Waiting on Redis (for the hourly budget) or on an account that needs reconnecting.
REDIS_WAIT = timedelta(minutes=1)
REAUTH_WAIT = timedelta(minutes=5)
# Spread the wake-ups of work waiting for the same freed budget slot.
BUDGET_JITTER_S = 30.0
# Recording an outcome after a send is retried on a fresh connection before giving up (the
# leg then stays IN_FLIGHT and the stale-claim sweep makes it UNCONFIRMED).
RECORD_RETRY_DELAYS = (0.2, 1.0, 3.0)


@dataclass(slots=True)
class Report:
    """What a run did, for logs and tests: each leg's state afterwards (or why untouched)."""

    private: str | None = None
    public: str | None = None
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        return {"private": self.private, "public": self.public, "notes": self.notes}


@dataclass(slots=True)
class _Run:
    resources: Resources
    worker_id: str
    delivery: Delivery
    now: datetime
    report: Report
    token: str = ""
    next_due: list[datetime] = field(default_factory=list)


async def process_comment(resources: Resources, *, worker_id: str, dm_log_id: int) -> Report:
    report = Report()
    now = datetime.now(UTC)
    async with claims.autocommit(resources.engine) as conn:
        delivery = await claims.load_delivery(conn, dm_log_id)
        if delivery is None:
            report.notes.append("no such log row")
            return report
        if delivery.trigger_kind != TriggerKind.COMMENT:
            report.notes.append(f"not a comment trigger ({delivery.trigger_kind})")
            return report
        run = _Run(resources, worker_id, delivery, now, report)
        pr_due = _due(delivery.pr_state, delivery.pr_next_attempt_at, now)
        pub_due = _due(delivery.pub_state, delivery.pub_next_attempt_at, now)
        if not (pr_due or pub_due):
            report.notes.append("nothing due")
            return report
        if not await _may_send(conn, run, pr_due=pr_due, pub_due=pub_due):
            return report
        held: _Held | None = None
        if pr_due and not pub_due:
            # The common case: claim on the connection that loaded the row.
            held = await _claim_private(conn, run)
    if pub_due:
        await _public_leg(run)
        if pr_due:
            async with claims.autocommit(resources.engine) as conn:
                held = await _claim_private(conn, run)
    if held is not None:
        await _send_private(run, held)
    if run.next_due:
        await enqueue_delivery(resources.queue, dm_log_id, min(run.next_due))
    return report


def _due(state: LegState | None, next_at: datetime | None, now: datetime) -> bool:
    return state is LegState.PENDING and (next_at is None or next_at <= now + timedelta(seconds=1))


# --- checks --------------------------------------------------------------------------------


async def _may_send(conn: AsyncConnection, run: _Run, *, pr_due: bool, pub_due: bool) -> bool:
    """Campaign active, account able to send, deadline ahead, token readable."""
    delivery, now = run.delivery, run.now
    if delivery.campaign_status != "active":
        await _settle(conn, run, LegState.SKIPPED_CAMPAIGN_INACTIVE, "the campaign is not active")
        return False
    gate = accounts.gate_for(delivery.account_status, delivery.paused_until, now)
    if gate is accounts.Gate.SKIP:
        reason = f"the Instagram account is {delivery.account_status}"
        await _settle(conn, run, LegState.SKIPPED_ACCOUNT_PAUSED, reason)
        return False
    if delivery.deadline_at is not None and delivery.deadline_at <= now:
        await _settle(conn, run, LegState.SKIPPED_WINDOW_EXPIRED, "the 7-day reply window closed")
        return False
    if gate is accounts.Gate.WAIT:
        until = delivery.paused_until or now + REAUTH_WAIT
        reason = f"waiting: the Instagram account is {delivery.account_status}"
        await claims.postpone(conn, delivery.id, until, reason, private=pr_due, public=pub_due)
        run.report.notes.append(reason)
        return False
    if delivery.account_status != "active":
        await accounts.resume_expired_pauses(conn, delivery.account_id)
    try:
        run.token = open_access_token(
            run.resources.cipher,
            InstagramAccount(
                ig_user_id=delivery.ig_user_id,
                token_ciphertext=delivery.token_ciphertext,
                token_key_id=delivery.token_key_id,
            ),
        )
    except (MissingTokenError, TokenDecryptError) as exc:
        run.report.notes.append(f"no usable token: {exc}")
        await accounts.handle_token_refused(run.resources, delivery.account_id, None)
        reason = "waiting: the account's token cannot be used; reconnect the account"
        await claims.postpone(conn, delivery.id, now + REAUTH_WAIT, reason)
        return False
    return True


async def _settle(conn: AsyncConnection, run: _Run, state: LegState, reason: str) -> None:
    await claims.settle_pending(conn, run.delivery.id, state, reason)
    run.report.private = run.report.public = state.value
    run.report.notes.append(reason)


# --- the public reply ------------------------------------------------------------------------


async def _public_leg(run: _Run) -> None:
    delivery = run.delivery
    variants = [v for v in delivery.public_replies if v.strip()]
    # Variety, not secrecy: any generator will do for picking a variant.
    chosen = random.choice(variants) if variants else ""  # noqa: S311
    reply = render(chosen, username=delivery.recipient_username, link=None) if chosen else ""
    async with claims.autocommit(run.resources.engine) as conn:
        if not reply:
            await claims.settle_pending(
                conn, delivery.id, LegState.FAILED, "the campaign has no public reply text",
                private=False,
            )  # fmt: skip
            run.report.public = LegState.FAILED.value
            return
        claim = await claims.claim_public_reply(
            conn, dm_log_id=delivery.id, worker_id=run.worker_id, reply_text=reply
        )
    if claim is None:
        run.report.public = "not claimed"
        return
    started = time.perf_counter()
    verdict: Verdict | None = None
    reply_id = ""
    try:
        reply_id = await run.resources.graph.reply_to_comment(
            run.token, delivery.trigger_id, reply, timeout_s=run.resources.settings.send_timeout_s
        )
    except GraphError as exc:
        verdict = classify_error(exc, Leg.PUBLIC_REPLY)
    report = call_report(verdict, _elapsed_ms(started))
    if verdict is None:
        update = LegUpdate(LegState.SENT, message_id=reply_id)
    else:
        update = await _failure(run, claim, verdict, private=False)
    await _record(run, claim, report, update)


# --- the private reply ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Held:
    """A won private-reply claim, the hourly slot reserved for it and the message to send."""

    claim: Claim
    slot: Slot
    message: OutgoingMessage


def _budget(run: _Run) -> HourlyBudget:
    return HourlyBudget(run.resources.redis, limit=run.resources.settings.private_replies_per_hour)


async def _claim_private(conn: AsyncConnection, run: _Run) -> _Held | None:
    delivery, now = run.delivery, run.now
    message = build_message(
        delivery.dm_text, buttons_of(delivery.buttons), username=delivery.recipient_username
    )
    budget = _budget(run)
    try:
        reserved = await budget.reserve(delivery.account_id, tag=str(delivery.id))
    except (RedisError, OSError):
        reason = "waiting: the hourly budget (Redis) is unavailable"
        await claims.postpone(conn, delivery.id, now + REDIS_WAIT, reason, public=False)
        run.report.notes.append(reason)
        return None
    if isinstance(reserved, BudgetFull):
        await _budget_full(conn, run, reserved)
        return None
    claim = await claims.claim_private_reply(
        conn,
        dm_log_id=delivery.id,
        worker_id=run.worker_id,
        request_kind=message.kind,
        message_text=message.text,
        month=usage_month(now),
    )
    if claim is None or not claim.won:
        await _release_slot(budget, reserved)
        run.report.private = claim.state.value if claim is not None else "not claimed"
        return None
    return _Held(claim, reserved, message)


async def _budget_full(conn: AsyncConnection, run: _Run, full: BudgetFull) -> None:
    delivery = run.delivery
    jitter = random.uniform(0, BUDGET_JITTER_S)  # noqa: S311 - spreading wake-ups, not secrecy
    free_at = run.now + timedelta(seconds=full.wait_s + jitter)
    if delivery.deadline_at is not None and free_at >= delivery.deadline_at:
        reason = "the hourly private-reply budget stays full until the 7-day window closes"
        await claims.settle_pending(
            conn, delivery.id, LegState.SKIPPED_WINDOW_EXPIRED, reason, public=False
        )
        run.report.private = LegState.SKIPPED_WINDOW_EXPIRED.value
        return
    reason = "waiting for a slot in the account's hourly private-reply budget"
    await claims.postpone(conn, delivery.id, free_at, reason, public=False)
    run.report.private = "waiting for budget"
    run.next_due.append(free_at)


async def _send_private(run: _Run, held: _Held) -> None:
    delivery = run.delivery
    claim = held.claim
    verdict, message_id, latency_ms = await _call(run, held.message)
    if verdict is not None and verdict.template_rejected and held.message.kind == "template":
        # Meta refused the template itself, so nothing was delivered: plain text may follow,
        # as a second call (and attempt row) under the same claim.
        fallback = text_message(
            delivery.dm_text, buttons_of(delivery.buttons), username=delivery.recipient_username
        )
        async with claims.autocommit(run.resources.engine) as conn:
            claim = await claims.start_next_call(
                conn,
                claim,
                call=call_report(verdict, latency_ms),
                request_kind=fallback.kind,
                worker_id=run.worker_id,
            )
        verdict, message_id, latency_ms = await _call(run, fallback)
    report = call_report(verdict, latency_ms)
    if verdict is None:
        update = sent_update(message_id)
    else:
        update = await _failure(run, claim, verdict, private=True)
    if await _record(run, claim, report, update) and update.state is LegState.UNCONFIRMED:
        await enqueue_verification(run.resources.queue, delivery.id)
    if verdict is not None and verdict.definite:
        await _release_slot(_budget(run), held.slot)


async def _call(run: _Run, message: OutgoingMessage) -> tuple[Verdict | None, str, int]:
    """One POST /messages: (None, message id, ms) when sent, else (verdict, "", ms)."""
    resources = run.resources
    started = time.perf_counter()
    try:
        sent = await resources.graph.send_message(
            run.token,
            run.delivery.ig_user_id,
            message.private_reply(run.delivery.trigger_id),
            timeout_s=resources.settings.send_timeout_s,
        )
    except GraphError as exc:
        return classify_error(exc, Leg.PRIVATE_REPLY), "", _elapsed_ms(started)
    return None, sent.message_id, _elapsed_ms(started)


# --- shared by both legs ------------------------------------------------------------------------


async def _failure(run: _Run, claim: Claim, verdict: Verdict, *, private: bool) -> LegUpdate:
    """The leg's next state, after carrying out what the answer says about the account."""
    delivery = run.delivery
    now = datetime.now(UTC)
    wait_until: datetime | None = None
    schedule = verdict.outcome is AttemptClass.RETRYABLE
    if verdict.account_action is AccountAction.PAUSE:
        wait_until = await accounts.pause_for_policy_block(
            run.resources, delivery.account_id, now=now, detail=verdict.message or ""
        )
        schedule = False  # the relay resumes the account's work when the pause ends
    elif verdict.account_action is AccountAction.REFRESH_TOKEN:
        outcome = await accounts.handle_token_refused(
            run.resources, delivery.account_id, delivery.token_ciphertext
        )
        if outcome is accounts.TokenOutcome.REAUTH:
            wait_until, schedule = now + REAUTH_WAIT, False
        else:
            wait_until = now + accounts.TOKEN_WAIT
    manual = (delivery.pr_evidence or {}).get("manual_retry") if private else None
    ctx = AttemptContext(
        attempt_no=claim.attempt_no,
        attempt_limit=delivery.pr_attempt_limit if private else claims.MAX_PUBLIC_ATTEMPTS,
        now=now,
        deadline_at=delivery.deadline_at,
        quota_month=claim.quota_month,
        manual_retry_from=manual.get("from_state") if isinstance(manual, dict) else None,
    )
    update = failure_update(verdict, ctx, account_wait_until=wait_until, private=private)
    if schedule and update.state is LegState.PENDING and update.next_attempt_at is not None:
        run.next_due.append(update.next_attempt_at)
    return update


async def _record(run: _Run, claim: Claim, call: CallReport, update: LegUpdate) -> bool:
    """Write the outcome, retrying on a fresh connection if the database connection fails."""
    leg_name = "private" if claim.leg is Leg.PRIVATE_REPLY else "public"
    for delay in (*RECORD_RETRY_DELAYS, None):
        try:
            async with claims.autocommit(run.resources.engine) as conn:
                recorded = await claims.record(
                    conn,
                    claim,
                    dm_log_id=run.delivery.id,
                    worker_id=run.worker_id,
                    call=call,
                    update=update,
                )
        except (OperationalError, InterfaceError, DBAPIError) as exc:
            if delay is None:
                # The leg stays IN_FLIGHT; the stale-claim sweep will make it UNCONFIRMED.
                logger.error(  # noqa: TRY400 - the reason is enough; no traceback for a DB outage
                    "could not record the %s leg of %s (%s): %s",
                    leg_name,
                    run.delivery.id,
                    update.state,
                    exc,
                )
                setattr(run.report, leg_name, "unrecorded")
                return False
            await asyncio.sleep(delay)
            continue
        if not recorded:
            logger.warning(
                "the %s leg of %s was no longer ours to record (%s)",
                leg_name,
                run.delivery.id,
                update.state,
            )
            setattr(run.report, leg_name, "claim lost")
            return False
        setattr(run.report, leg_name, update.state.value)
        return True
    return False


async def _release_slot(budget: HourlyBudget, slot: Slot) -> None:
    try:
        await budget.release(slot)
    except (RedisError, OSError):
        logger.warning("could not give back an hourly budget slot of account %s", slot.account_id)


def _elapsed_ms(started: float) -> int:
    return int((time.perf_counter() - started) * 1000)
