"""The steps every send shares, for the comment flow and the DM flow alike.

- `open_run`: the row loaded, which legs are due, and `may_send`: campaign active, account
  able to send, deadline ahead (7 days for a private reply, 24 hours for a DM), token
  readable — or the legs are settled / postponed;
- `hold_for_account`: what an account that cannot send means for the legs, whether the load
  saw it or a claim refused because of it;
- `send_claimed`: the call(s) under a won claim — each preceded by the note that its request
  is leaving (`mark_request`, or the claim's own note when the message leaves right after
  it), each its own attempt row: a DM's image first (unless an earlier
  call of the row may already have delivered it), the message, then its fallbacks while Meta
  refuses the template itself — then one record statement, an inbox check for an UNCONFIRMED
  outcome, and the job of a follow-up the record scheduled. The image's answer decides
  nothing about the leg: whatever it was, the message goes next, and the leg is its outcome;
- `failure`: what a refusal means for the leg, after carrying out what it says about the
  account (368 pause, 190 token), and for a 100/2534025 whether an earlier attempt was
  ambiguous;
- `record`: writing the outcome, retried on a fresh connection if the database drops.

A private reply goes to the comment (`recipient.comment_id`); every other row is a DM to the
person's IGSID (`recipient.id`), which the tap or message opened the 24-hour window for.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

from redis.exceptions import RedisError
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection

from app.accounts.tokens import MissingTokenError, open_access_token
from app.campaigns.message_format import OutgoingMessage
from app.clicks.links import LinkTracker
from app.clicks.tokens import link_key
from app.crypto import TokenDecryptError
from app.db.engine import autocommit
from app.db.models import (
    AttemptClass,
    IdempotencyHitKind,
    Leg,
    LegState,
    TriggerKind,
)
from app.db.raw import DriverError
from app.delivery.content.compose import Content
from app.delivery.content.follow_ups import FollowUpPlan
from app.delivery.send import account_state, claims, pacer, recording
from app.delivery.send.claims import load_delivery
from app.delivery.send.legs import (
    MAX_PUBLIC_ATTEMPTS,
    AccountUnable,
    CallReport,
    Claim,
    Delivery,
    LegUpdate,
    Recorded,
)
from app.delivery.send.outcomes import AttemptContext, call_report, failure_update, sent_update
from app.delivery.send.scheduling import enqueue_delivery, enqueue_verification, kick_pacer
from app.delivery.send.throttle import Throttle
from app.instagram.classify import AccountAction, Verdict, classify_error
from app.instagram.graph import GraphApiError, GraphError, Usage
from app.instruments import SEND_SECONDS, meta_answer, meta_ok
from app.operations.idempotency_hits import count_hit
from app.resources import Resources

logger = logging.getLogger("oncereply.delivery")

# A leg in one of these states was claimed by an earlier job: a new job for it is a repeat.
ALREADY_TAKEN = frozenset({LegState.IN_FLIGHT, LegState.SENT, LegState.UNCONFIRMED})
# Waiting on Redis (for the hourly budget) or on an account that needs reconnecting.
REDIS_WAIT = timedelta(minutes=1)
REAUTH_WAIT = timedelta(minutes=5)
# What `send_claimed` answers when the request was never sent (see `mark_request`): definite,
# so the caller gives back what it reserved for the send.
NOT_SENT = Verdict(AttemptClass.RETRYABLE, "not sent: the claim was lost before the request left")
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
class Run:
    resources: Resources
    worker_id: str
    delivery: Delivery
    now: datetime
    report: Report
    token: str = ""
    next_due: list[datetime] = field(default_factory=list)
    pr_due: bool = False
    pub_due: bool = False
    # The pacer's grant this job carries (`budget.grant_stamp`), if it was enqueued by one,
    # and whether the private leg dealt with its slot (used it, or gave it back).
    grant: int | None = None
    grant_settled: bool = False
    # The account's private-reply slots still in flight, as the last give-back or stamp of
    # this run's slot answered (None when not known): the granted job's `batch_settled` reads
    # nothing more then.
    slots_in_flight: int | None = None
    # Its public reply's grant (`public_pacer`): the job then posts the public reply alone.
    public_grant: int | None = None
    # The attempt rows of this run's private-reply calls noted as leaving (`mark_request`): a
    # rebuild of the budget while one was in flight counted it under its name
    # (`budget.attempt_member`), so the run's slot is stamped or given back under those too.
    private_calls: list[int] = field(default_factory=list)

    @property
    def is_comment(self) -> bool:
        return self.delivery.trigger_kind == TriggerKind.COMMENT

    def link_tracker(self) -> LinkTracker:
        """Makes this delivery's links tracked ones (`app.clicks.links`)."""
        settings = self.resources.settings
        return LinkTracker(
            base_url=settings.public_base_url,
            key=link_key(settings.secret_key),
            dm_log_id=self.delivery.id,
            campaign_name=self.delivery.campaign_name,
            utm=self.delivery.utm_enabled,
        )


async def open_run(
    conn: AsyncConnection,
    resources: Resources,
    report: Report,
    *,
    worker_id: str,
    dm_log_id: int,
) -> Run | None:
    """The row to deliver, with which legs are due, or None (noted in `report`): missing,
    nothing due, or not to be sent now (`may_send` settled or postponed it)."""
    delivery = await load_delivery(conn, dm_log_id)
    if delivery is None:
        report.notes.append("no such log row")
        return None
    now = datetime.now(UTC)
    run = Run(resources, worker_id, delivery, now, report)
    run.pr_due = due(delivery.pr_state, delivery.pr_next_attempt_at, now)
    # Only a comment has a public-reply leg (a DM row's `pub_state` is NULL).
    run.pub_due = due(delivery.pub_state, delivery.pub_next_attempt_at, now)
    if not (run.pr_due or run.pub_due):
        report.notes.append("nothing due")
        if delivery.pr_state in ALREADY_TAKEN:
            # A second job for a leg another job sent or is sending: a duplicate blocked.
            await count_blocked_send(conn, delivery)
        return None
    if not await may_send(conn, run, pr_due=run.pr_due, pub_due=run.pub_due):
        return None
    return run


async def count_blocked_send(conn: AsyncConnection, delivery: Delivery) -> None:
    await count_hit(
        conn,
        workspace_id=delivery.workspace_id,
        account_id=delivery.account_id,
        kind=IdempotencyHitKind.SEND_BLOCKED,
        scope="delivery.send",
    )


def due(state: LegState | None, next_at: datetime | None, now: datetime) -> bool:
    return state is LegState.PENDING and (next_at is None or next_at <= now + timedelta(seconds=1))


def window_closed_reason(trigger_kind: str) -> str:
    if trigger_kind == TriggerKind.COMMENT:
        return "the 7-day reply window closed"
    return "the 24-hour messaging window closed"


# --- checks --------------------------------------------------------------------------------


async def may_send(conn: AsyncConnection, run: Run, *, pr_due: bool, pub_due: bool) -> bool:
    """Campaign active, account able to send, deadline ahead, token readable."""
    delivery, now = run.delivery, run.now
    if delivery.campaign_status != "active":
        await settle(conn, run, LegState.SKIPPED_CAMPAIGN_INACTIVE, "the campaign is not active")
        return False
    unable = AccountUnable(delivery.account_status, delivery.paused_until)
    gate = account_state.gate_for(unable.status, unable.paused_until, now)
    if gate is account_state.Gate.SKIP:
        await hold_for_account(conn, run, unable, private=pr_due, public=pub_due)
        return False
    if delivery.deadline_at is not None and delivery.deadline_at <= now:
        reason = window_closed_reason(delivery.trigger_kind)
        await settle(conn, run, LegState.SKIPPED_WINDOW_EXPIRED, reason)
        return False
    if gate is account_state.Gate.WAIT:
        await hold_for_account(conn, run, unable, private=pr_due, public=pub_due)
        return False
    if delivery.account_status != "active":
        await account_state.resume_expired_pauses(conn, delivery.account_id)
    try:
        # The row's own copy of the account's columns: no ORM object made per delivery.
        run.token = open_access_token(run.resources.cipher, delivery)
    except (MissingTokenError, TokenDecryptError) as exc:
        run.report.notes.append(f"no usable token: {exc}")
        await account_state.handle_token_refused(run.resources, delivery.account_id, None)
        reason = "waiting: the account's token cannot be used; reconnect the account"
        await recording.postpone(conn, delivery.id, now + REAUTH_WAIT, reason)
        return False
    return True


async def hold_for_account(
    conn: AsyncConnection,
    run: Run,
    unable: AccountUnable,
    *,
    private: bool,
    public: bool,
) -> None:
    """Work on an account that cannot send now, seen at load or refused by a claim: a
    creator's pause or a disconnect skips the row's pending legs; an automatic pause or a
    refused token keeps the given legs PENDING until it may be over (the relay picks them up
    once the account is active again). An automatic pause that has just run out changes
    nothing: the leg stays due."""
    now = datetime.now(UTC)
    gate = account_state.gate_for(unable.status, unable.paused_until, now)
    if gate is account_state.Gate.SKIP:
        reason = f"the Instagram account is {unable.status}"
        await settle(conn, run, LegState.SKIPPED_ACCOUNT_PAUSED, reason)
    elif gate is account_state.Gate.WAIT:
        until = unable.paused_until or now + REAUTH_WAIT
        reason = f"waiting: the Instagram account is {unable.status}"
        await recording.postpone(
            conn, run.delivery.id, until, reason, private=private, public=public
        )
        run.report.notes.append(reason)


async def settle(
    conn: AsyncConnection, run: Run, state: LegState, reason: str, *, public: bool = True
) -> None:
    await recording.settle_pending(conn, run.delivery.id, state, reason, public=public)
    run.report.private = state.value
    if public:
        run.report.public = state.value
    run.report.notes.append(reason)


# --- the send --------------------------------------------------------------------------------


async def call_send(run: Run, message: OutgoingMessage) -> tuple[Verdict | None, str, int]:
    """One POST /messages: (None, message id, ms) when sent, else (verdict, "", ms)."""
    resources, delivery = run.resources, run.delivery
    if run.is_comment:
        body = message.private_reply(delivery.trigger_id)
    else:
        body = message.direct(delivery.recipient_id or "")
    started = time.perf_counter()
    try:
        sent = await resources.graph.send_message(
            run.token, delivery.ig_user_id, body, timeout_s=resources.settings.send_timeout_s
        )
    except GraphError as exc:
        verdict = classify_error(exc, Leg.PRIVATE_REPLY)
        observe_call("messages", verdict, started)
        latency = elapsed_ms(started)
        if isinstance(exc, GraphApiError):
            await observe_pace(run, exc.usage, exc.code)
        return verdict, "", latency
    observe_call("messages", None, started)
    latency = elapsed_ms(started)
    await observe_pace(run, sent.usage, None)
    return None, sent.message_id, latency


async def observe_pace(run: Run, usage: Usage, code: int | None) -> None:
    """What Meta's answer says about the account's pace (`throttle`); a change wakes its
    pacer. Never in the way of the send's own outcome."""
    resources, account_id = run.resources, run.delivery.account_id
    throttle = Throttle(resources.redis, window_s=resources.settings.private_reply_window_s)
    try:
        observed = await throttle.observe(account_id, usage, code=code)
        if observed is not None and observed.changed:
            await pacer.pace_changed(
                resources, throttle, run.delivery.workspace_id, account_id, observed.hold_s
            )
    except (RedisError, OSError, SQLAlchemyError) as exc:
        logger.warning("could not note the pace of account %s: %s", account_id, exc)


def observe_call(endpoint: str, verdict: Verdict | None, started: float) -> None:
    """Meta's answer and the call's time, in this process's metrics (`app/instruments.py`)."""
    outcome = "sent" if verdict is None else verdict.outcome.value
    SEND_SECONDS.labels(endpoint, outcome).observe(time.perf_counter() - started)
    if verdict is None:
        meta_ok(endpoint)
    else:
        meta_answer(endpoint, verdict.code, verdict.subcode)


async def send_claimed(
    run: Run,
    claim: Claim,
    content: Content,
    *,
    follow_up: FollowUpPlan | None = None,
    marked: bool = False,
) -> Verdict | None:
    """Send under a won claim and record the outcome; returns the last call's verdict (None:
    sent). A follow-up the record scheduled gets its job. `marked`: the claim already noted
    the message's request (`claims.claim_private_reply`'s `note_request`; a content with a
    lead is noted here, call by call)."""
    delivery = run.delivery
    if content.lead is not None:
        sent_claim = await _send_lead(run, claim, content.lead, next_kind=content.message.kind)
        if sent_claim is None:
            return NOT_SENT
        claim, marked = sent_claim, False
    if not marked:
        if not await mark_request(run, claim):
            return NOT_SENT
    elif claim.attempt_id is not None:
        # Noted by the claim itself: the call counts among the run's noted ones all the same.
        run.private_calls.append(claim.attempt_id)
    verdict, message_id, latency_ms = await call_send(run, content.message)
    fallbacks = list(content.fallbacks)
    while verdict is not None and verdict.template_rejected and fallbacks:
        # Meta refused the template itself, so nothing was delivered: the next, plainer form
        # may follow, as another call (and attempt row) under the same claim.
        fallback = fallbacks.pop(0)
        async with autocommit(run.resources.engine) as conn:
            claim = await recording.start_next_call(
                conn,
                claim,
                call=call_report(verdict, latency_ms),
                request_kind=fallback.kind,
                worker_id=run.worker_id,
            )
        if not await mark_request(run, claim):
            return NOT_SENT
        verdict, message_id, latency_ms = await call_send(run, fallback)
    report = call_report(verdict, latency_ms)
    if verdict is None:
        update = replace(sent_update(message_id), follow_up=follow_up)
    else:
        update = await failure(run, claim, verdict, private=True)
    recorded = await record(run, claim, report, update)
    if recorded and update.state is LegState.UNCONFIRMED:
        await enqueue_verification(run.resources.queue, delivery.id)
    if recorded and update.to_pacer:
        due = update.next_attempt_at.timestamp() if update.next_attempt_at else 0
        await kick_pacer(run.resources.queue, [delivery.account_id], at=due)
    if recorded.follow_up_id is not None:
        run.report.notes.append(f"follow-up {recorded.follow_up_id} scheduled")
        await enqueue_delivery(
            run.resources.queue,
            recorded.follow_up_id,
            recorded.follow_up_due,
            kind=TriggerKind.FOLLOW_UP,
        )
    return verdict


async def _send_lead(
    run: Run, claim: Claim, lead: OutgoingMessage, *, next_kind: str
) -> Claim | None:
    """The image before the message, under the claim's first attempt row; the claim for the
    message's call, or None when nothing may be sent (the claim was lost). Skipped when an
    earlier call of this row sent it or may have: a retry does not show it twice."""
    async with autocommit(run.resources.engine) as conn:
        earlier = await claims.earlier_call_may_have_sent(
            conn, dm_log_id=run.delivery.id, request_kind=lead.kind, attempt_id=claim.attempt_id
        )
        if earlier:
            run.report.notes.append("image already sent by an earlier call")
            return await recording.relabel_call(conn, claim, request_kind=next_kind)
    if not await mark_request(run, claim):
        return None
    verdict, _, latency_ms = await call_send(run, lead)
    if verdict is not None:
        run.report.notes.append(f"image not sent: {verdict.reason}")
    async with autocommit(run.resources.engine) as conn:
        return await recording.start_next_call(
            conn,
            claim,
            call=call_report(verdict, latency_ms),
            request_kind=next_kind,
            worker_id=run.worker_id,
        )


async def mark_request(run: Run, claim: Claim) -> bool:
    """Note that the claimed leg's request is about to leave (`claims.mark_request_sent`);
    False when it must not: the claim was taken over, or the database cannot take the note.
    The leg then stays as it is, and the stale-claim sweep gives a leg with no note back to
    PENDING."""
    leg_name = "private" if claim.leg is Leg.PRIVATE_REPLY else "public"
    try:
        async with autocommit(run.resources.engine) as conn:
            marked = await _mark(conn, run, claim)
    except (OperationalError, InterfaceError, DBAPIError, DriverError) as exc:
        logger.warning(
            "not sending the %s leg of %s: could not note the request before it left: %s",
            leg_name,
            run.delivery.id,
            exc,
        )
        setattr(run.report, leg_name, "not sent")
        return False
    if not marked:
        logger.warning(
            "not sending the %s leg of %s: the claim was no longer ours", leg_name, run.delivery.id
        )
        setattr(run.report, leg_name, "claim lost")
    elif claim.leg is Leg.PRIVATE_REPLY and claim.attempt_id is not None:
        run.private_calls.append(claim.attempt_id)
    return marked


async def _mark(conn: AsyncConnection, run: Run, claim: Claim) -> bool:
    return await claims.mark_request_sent(
        conn,
        dm_log_id=run.delivery.id,
        worker_id=run.worker_id,
        attempt_no=claim.attempt_no,
        leg=claim.leg,
    )


# --- outcomes ---------------------------------------------------------------------------------


async def failure(run: Run, claim: Claim, verdict: Verdict, *, private: bool) -> LegUpdate:
    """The leg's next state, after carrying out what the answer says about the account."""
    delivery = run.delivery
    now = datetime.now(UTC)
    wait_until: datetime | None = None
    # A comment's private reply refused for the account's pace waits for the pacer
    # (`send_claimed` kicks it), not for a job of its own.
    paced = private and run.is_comment
    schedule = verdict.outcome is AttemptClass.RETRYABLE and not (paced and verdict.pace_limited)
    if verdict.account_action is AccountAction.PAUSE:
        wait_until = await account_state.pause_for_policy_block(
            run.resources, delivery.account_id, now=now, detail=verdict.message or ""
        )
        schedule = False  # the relay resumes the account's work when the pause ends
    elif verdict.account_action is AccountAction.REFRESH_TOKEN:
        outcome = await account_state.handle_token_refused(
            run.resources, delivery.account_id, delivery.token_ciphertext
        )
        if outcome is account_state.TokenOutcome.REAUTH:
            wait_until, schedule = now + REAUTH_WAIT, False
        else:
            wait_until = now + account_state.TOKEN_WAIT
    # Only a comment's private reply can be "already used" by an earlier send that arrived.
    earlier_ambiguous = False
    if private and run.is_comment and verdict.comment_already_used:
        async with autocommit(run.resources.engine) as conn:
            earlier_ambiguous = await claims.earlier_attempt_ambiguous(
                conn, dm_log_id=delivery.id, attempt_id=claim.attempt_id
            )
    ctx = AttemptContext(
        attempt_no=claim.attempt_no,
        attempt_limit=delivery.pr_attempt_limit if private else MAX_PUBLIC_ATTEMPTS,
        now=now,
        deadline_at=delivery.deadline_at,
        quota_month=claim.quota_month,
        earlier_ambiguous=earlier_ambiguous,
        paced=paced,
    )
    update = failure_update(verdict, ctx, account_wait_until=wait_until, private=private)
    if schedule and update.state is LegState.PENDING and update.next_attempt_at is not None:
        run.next_due.append(update.next_attempt_at)
    return update


async def record(run: Run, claim: Claim, call: CallReport, update: LegUpdate) -> Recorded:
    """Write the outcome, retrying on a fresh connection if the database connection fails."""
    leg_name = "private" if claim.leg is Leg.PRIVATE_REPLY else "public"
    for delay in (*RECORD_RETRY_DELAYS, None):
        try:
            async with autocommit(run.resources.engine) as conn:
                recorded = await recording.record(
                    conn,
                    claim,
                    dm_log_id=run.delivery.id,
                    worker_id=run.worker_id,
                    call=call,
                    update=update,
                )
        except (OperationalError, InterfaceError, DBAPIError, DriverError) as exc:
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
                return Recorded(False)
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
            return recorded
        setattr(run.report, leg_name, update.state.value)
        return recorded
    return Recorded(False)


def elapsed_ms(started: float) -> int:
    return int((time.perf_counter() - started) * 1000)
