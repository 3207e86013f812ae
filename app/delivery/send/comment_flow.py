"""The comment flow: a comment's public reply and private reply through the delivery protocol.

Order: load (row, campaign, account in one query) → checks (campaign active, account able to
send, deadline) → public-reply leg → private-reply leg: hourly slot (Redis) → one claim
statement (person, quota, leg, attempt row) → the request's note (on the same connection) →
send → classify → one record statement → give back the slot on a definite answer (any other
answer counts it from its arrival). Only the worker whose claim returned IN_FLIGHT calls
Meta.

The hourly slot is the one the account's pacer granted the row when the job carries that
grant; otherwise the job takes a slot of its own, unless the account has a backlog. With no
slot the row is left to the pacer and holds no job (`pacer`).
The load and checks are `dispatch`'s (`steps.open_run`); `CommentFlow` does the rest.

The private leg always goes first, so a public reply never delays a DM, and public replies
have an hourly budget of their own (`PUBLIC_REPLIES_PER_HOUR`), so they never take a DM's
slot: with theirs full, the public leg is left to the account's pacer and holds no job
(`public_pacer`), which later gives it a job of its own carrying its slot. A public reply that
says a
DM was sent is posted only once the DM is SENT (the campaign's `public_reply_after_dm`, on by
default): if it is not SENT in this run, the public leg waits (`recording.hold_public`) until a
run that sends the DM (a retry) or the inbox check that confirms it makes it due. A reply that
does not mention the DM (the setting off) is posted whatever becomes of the DM. A campaign
may skip its public reply while the account's DMs wait for its pacer
(`public_reply_skip_in_backlog`): the leg is then settled SKIPPED_RATE_LIMIT, saying so.

The private reply is the campaign's link message, or — for a two-step campaign — its opening
DM or follow prompt (`follow_gate.comment_reply`), whose button brings the person back as a
tap (`dm_flow`). The steps shared with the DM flow live in `steps`.

The job itself is never retried by SAQ: a later attempt is a new job scheduled at the leg's
`next_attempt_at` (see `scheduling`), and the due-work relay re-enqueues anything a lost job
left behind. Connections are returned to the pool while Meta is being called.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from redis.exceptions import RedisError
from sqlalchemy.ext.asyncio import AsyncConnection

from app.campaigns.message_format import render
from app.db.engine import autocommit
from app.db.models import Leg, LegState, PersonClaim
from app.delivery.content import compose, follow_gate
from app.delivery.content.compose import Content
from app.delivery.send import claims, recording
from app.delivery.send.budget import (
    GRANT_TTL_S,
    BudgetFull,
    HourlyBudget,
    Slot,
    attempt_member,
    grant_member,
    grant_stamp,
)
from app.delivery.send.budget_history import account_budget, public_reply_budget
from app.delivery.send.legs import AccountUnable, Claim, Delivery, LegUpdate
from app.delivery.send.outcomes import call_report
from app.delivery.send.pacer import MISSED_REASON, queue_for_budget
from app.delivery.send.public_pacer import queue_public
from app.delivery.send.quota import usage_month
from app.delivery.send.scheduling import kick_pacer
from app.delivery.send.steps import (
    REAUTH_WAIT,
    REDIS_WAIT,
    Run,
    elapsed_ms,
    failure,
    hold_for_account,
    mark_request,
    observe_call,
    record,
    send_claimed,
)
from app.instagram.classify import Verdict, classify_error
from app.instagram.graph import GraphError

logger = logging.getLogger("oncereply.delivery")

BACKLOG_SKIP_REASON = (
    "skipped: DMs were waiting for Instagram's hourly limit, and this campaign skips its "
    "public reply then"
)
PUBLIC_REDIS_REASON = (
    "waiting: the public replies' hourly limit could not be checked (Redis did not answer); "
    "tried again in a minute"
)


class CommentFlow:
    """One comment row's legs, from a checked `Run` on (`dispatch` made it)."""

    def __init__(self, run: Run) -> None:
        self._run = run
        self._held: _Held | None = None

    @property
    def _dm_first(self) -> bool:
        return self._run.delivery.public_reply_after_dm

    async def start(self, conn: AsyncConnection) -> bool:
        """On the connection that loaded the row: claim the private reply, which always goes
        first, its request noted by the claim when the message leaves next (so neither costs
        another connection or round trip)."""
        run = self._run
        if run.pr_due:
            self._held = await _claim_private(conn, run)
        return True

    async def finish(self) -> None:
        """The send under a won claim, then the public reply: once the DM is sent when it
        waits for the DM, else whatever became of the DM."""
        run = self._run
        held = self._held
        sent = False
        if held is not None:
            verdict = await send_claimed(
                run, held.claim, held.content, marked=held.content.lead is None
            )
            sent = verdict is None
            # `send_claimed` recorded the answer: a rebuild of the budget since either read
            # it or counted the calls in flight under their attempt rows' names.
            recorded_as = [attempt_member(call) for call in run.private_calls]
            if verdict is not None and verdict.definite:
                run.slots_in_flight = await _release_slot(_budget(run), held.slot, recorded_as)
            else:
                run.slots_in_flight = await _stamp_slot(_budget(run), held.slot, recorded_as)
        if self._dm_first and run.delivery.pub_state is LegState.PENDING:
            await self._public_after_dm(sent_now=sent)
        elif run.pub_due and not self._dm_first:
            await _public_leg(run)

    async def _public_after_dm(self, *, sent_now: bool) -> None:
        run = self._run
        if sent_now or (not run.pr_due and run.delivery.pr_state is LegState.SENT):
            if not run.pub_due:
                async with autocommit(run.resources.engine) as conn:
                    await recording.release_public(conn, run.delivery.id)
            await _public_leg(run)
        elif run.pub_due:
            async with autocommit(run.resources.engine) as conn:
                await recording.hold_public(conn, run.delivery.id)
            run.report.public = "waiting for the DM"


def comment_content(delivery: Delivery, track: compose.TrackLink | None = None) -> Content:
    """The private reply: the link, or a two-step campaign's opening DM or follow prompt."""
    kind = follow_gate.comment_reply(
        opening_dm=delivery.opening_dm_enabled, follow_gate=delivery.follow_gate_enabled
    )
    return compose.content_for(
        kind, delivery.texts(), username=delivery.recipient_username, frozen_text=None,
        track=track,
    )  # fmt: skip


# --- the public reply ------------------------------------------------------------------------


async def _public_leg(run: Run) -> bool:
    """Post the public reply, after the private reply's send: through its own hourly budget
    (`budget_history.public_reply_budget`), so it never takes a DM's slot, or skipped while
    DMs wait for the account's pacer if the campaign says so. True when the account cannot
    send now (its answer was a 368 or a 190, or its claim was refused for another job's)."""
    delivery = run.delivery
    variants = [v for v in delivery.public_replies if v.strip()]
    # Variety, not secrecy: any generator will do for picking a variant.
    chosen = random.choice(variants) if variants else ""  # noqa: S311
    reply = render(chosen, username=delivery.recipient_username, link=None) if chosen else ""
    budget = public_reply_budget(run.resources)
    async with autocommit(run.resources.engine) as conn:
        if not reply:
            await recording.settle_pending(
                conn, delivery.id, LegState.FAILED, "the campaign has no public reply text",
                private=False,
            )  # fmt: skip
            run.report.public = LegState.FAILED.value
            return False
        if delivery.public_reply_skip_in_backlog and delivery.account_backlog:
            await recording.settle_pending(
                conn, delivery.id, LegState.SKIPPED_RATE_LIMIT, BACKLOG_SKIP_REASON,
                private=False,
            )  # fmt: skip
            run.report.public = LegState.SKIPPED_RATE_LIMIT.value
            return False
        slot = await _public_slot(conn, run, budget)
        if slot is None:
            return False
        claim = await claims.claim_public_reply(
            conn, dm_log_id=delivery.id, worker_id=run.worker_id, reply_text=reply
        )
        if isinstance(claim, AccountUnable):
            # Another job met a 368 or 190 after this one loaded the row.
            await _release_slot(budget, slot)
            await hold_for_account(conn, run, claim, private=run.pr_due, public=True)
            run.report.public = "waiting for the account"
            return True
    if claim is None:
        await _release_slot(budget, slot)
        run.report.public = "not claimed"
        return False
    if not await mark_request(run, claim):
        await _release_slot(budget, slot)
        return False
    started = time.perf_counter()
    verdict: Verdict | None = None
    reply_id = ""
    try:
        reply_id = await run.resources.graph.reply_to_comment(
            run.token, delivery.trigger_id, reply, timeout_s=run.resources.settings.send_timeout_s
        )
    except GraphError as exc:
        verdict = classify_error(exc, Leg.PUBLIC_REPLY)
    observe_call("replies", verdict, started)
    report = call_report(verdict, elapsed_ms(started))
    if verdict is None:
        update = LegUpdate(LegState.SENT, message_id=reply_id)
    else:
        update = await failure(run, claim, verdict, private=False)
    await record(run, claim, report, update)
    await _settle_public_slot(budget, slot, claim, verdict)
    if verdict is None or verdict.account_action is None:
        return False
    if run.pr_due:
        # `failure` paused the account or dealt with its token: the private leg waits as long
        # as this one, unclaimed, so nothing is spent. A token wait already has its job in
        # `run.next_due`; a pause is lifted by the relay, which then enqueues both legs.
        until = update.next_attempt_at or datetime.now(UTC) + REAUTH_WAIT
        reason = f"waiting: {verdict.reason}"
        async with autocommit(run.resources.engine) as conn:
            await recording.postpone(conn, delivery.id, until, reason, public=False)
        run.report.notes.append(reason)
    return True


async def _settle_public_slot(
    budget: HourlyBudget, slot: Slot, claim: Claim, verdict: Verdict | None
) -> None:
    """The public reply's slot given back (nothing was posted) or counted from now, after its
    answer was recorded, as the private reply's: a rebuild of the budget since either read the
    answer or counted the attempt in flight under its name (`attempt_member`), which this
    rescores or removes with the slot."""
    recorded_as = [attempt_member(claim.attempt_id)] if claim.attempt_id is not None else []
    if verdict is not None and verdict.definite:
        await _release_slot(budget, slot, recorded_as)
    else:
        await _stamp_slot(budget, slot, recorded_as)


async def _public_slot(conn: AsyncConnection, run: Run, budget: HourlyBudget) -> Slot | None:
    """A slot of the public replies' budget: the pacer's grant this job carries, else one of
    its own while none of the account's public replies wait for a slot; else the leg is left
    to the account's pacer, holding no job (`public_pacer`)."""
    delivery = run.delivery
    granted_at = delivery.pub_granted_at
    taken: Slot | BudgetFull | None = None
    try:
        if granted_at is not None and granted_at <= run.now - timedelta(seconds=GRANT_TTL_S):
            granted_at = None  # lapsed: its job was lost, the pacer grants the leg again
        if run.public_grant is not None and (
            granted_at is None or run.public_grant != grant_stamp(granted_at)
        ):
            # This job's grant lapsed or was replaced by a later one: its slot was never used.
            stale = grant_member(delivery.id, run.public_grant)
            await budget.release(Slot(delivery.account_id, stale))
        if granted_at is not None:
            if run.public_grant != grant_stamp(granted_at):
                # The pacer granted the leg to another job, which posts it.
                run.report.public = "granted to the pacer's job"
                return None
            granted = Slot(delivery.account_id, grant_member(delivery.id, granted_at))
            taken = await budget.confirm(granted)
            if isinstance(taken, BudgetFull):
                # Paused since the grant, or its slot aged out: the leg waits for the pacer.
                await budget.release(granted)
        elif not delivery.public_backlog:
            taken = await budget.reserve(delivery.account_id, tag=f"p{delivery.id}")
    except (RedisError, OSError):
        until = run.now + REDIS_WAIT
        await recording.postpone(conn, delivery.id, until, PUBLIC_REDIS_REASON, private=False)
        run.next_due.append(until)
        run.report.public = "waiting for the public-reply budget"
        return None
    if isinstance(taken, Slot):
        return taken
    await queue_public(conn, delivery.id)
    if isinstance(taken, BudgetFull):
        # The replies already waiting have the pacer's runs; this one found the budget full.
        await kick_pacer(run.resources.queue, [delivery.account_id], at=time.time() + taken.wait_s)
    run.report.public = "waiting for the public-reply budget"
    return None


# --- the private reply ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Held:
    """A won private-reply claim, the hourly slot reserved for it and the message to send."""

    claim: Claim
    slot: Slot
    content: Content


def _budget(run: Run) -> HourlyBudget:
    return account_budget(run.resources)


async def _take_slot(conn: AsyncConnection, run: Run, budget: HourlyBudget) -> Slot | None:
    """The slot this send may use: the pacer's grant this job carries, else a slot of its own
    when the account has no backlog; else the row is left to the pacer (None)."""
    delivery = run.delivery
    granted_at = delivery.pr_granted_at
    run.grant_settled = True
    if granted_at is not None and granted_at <= run.now - timedelta(seconds=GRANT_TTL_S):
        granted_at = None  # lapsed: its job was lost, the pacer grants the row again
    if run.grant is not None and (granted_at is None or run.grant != grant_stamp(granted_at)):
        await _release_stale_grant(budget, run)
    if granted_at is not None:
        if run.grant != grant_stamp(granted_at):
            # The pacer granted the row to another job, which sends it.
            run.report.private = "granted to the pacer's job"
            return None
        granted = Slot(delivery.account_id, grant_member(delivery.id, granted_at))
        taken = await budget.confirm(granted)
        if isinstance(taken, BudgetFull):
            # Paused since the grant, or its slot aged out: the row waits for the pacer again.
            run.slots_in_flight = await budget.release(granted)
    elif delivery.account_backlog:
        await queue_for_budget(conn, delivery.id)
        await kick_pacer(run.resources.queue, [delivery.account_id])
        run.report.private = "waiting for budget"
        return None
    else:
        taken = await budget.reserve(delivery.account_id, tag=str(delivery.id))
    if isinstance(taken, BudgetFull):
        await _budget_full(conn, run, taken)
        return None
    # A slot taken: any count answered before it is out of date.
    run.slots_in_flight = None
    return taken


async def _release_stale_grant(budget: HourlyBudget, run: Run) -> None:
    """This job carries a grant of the row that lapsed (the job waited past `GRANT_TTL_S`)
    or was replaced by a later one: its slot was never used, so it is given back."""
    if run.grant is not None:
        member = grant_member(run.delivery.id, run.grant)
        run.slots_in_flight = await budget.release(Slot(run.delivery.account_id, member))


async def _claim_private(conn: AsyncConnection, run: Run) -> _Held | None:
    delivery, now = run.delivery, run.now
    content = comment_content(delivery, run.link_tracker().track)
    budget = _budget(run)
    try:
        reserved = await _take_slot(conn, run, budget)
    except (RedisError, OSError):
        reason = "waiting: the hourly budget (Redis) is unavailable"
        await recording.postpone(conn, delivery.id, now + REDIS_WAIT, reason, public=False)
        run.report.notes.append(reason)
        return None
    if reserved is None:
        return None
    claim = await claims.claim_private_reply(
        conn,
        dm_log_id=delivery.id,
        worker_id=run.worker_id,
        request_kind=content.message.kind,
        message_text=content.message.text,
        month=usage_month(now),
        message_kind=content.kind,
        person=PersonClaim.PRIVATE_REPLY,
        # A message with an image before it is noted call by call (`send_claimed`).
        note_request=content.lead is None,
    )
    if isinstance(claim, AccountUnable):
        run.slots_in_flight = await _release_slot(budget, reserved)
        await hold_for_account(conn, run, claim, private=True, public=False)
        run.report.private = run.report.private or "waiting for the account"
        return None
    if claim is None or not claim.won:
        run.slots_in_flight = await _release_slot(budget, reserved)
        run.report.private = claim.state.value if claim is not None else "not claimed"
        return None
    return _Held(claim, reserved, content)


async def _budget_full(conn: AsyncConnection, run: Run, full: BudgetFull) -> None:
    """No slot: the row waits for the account's pacer, holding no job of its own — unless its
    7-day window closes before the next slot frees."""
    delivery = run.delivery
    free_at = run.now + timedelta(seconds=full.wait_s)
    if delivery.deadline_at is not None and free_at >= delivery.deadline_at:
        await recording.settle_pending(
            conn, delivery.id, LegState.SKIPPED_WINDOW_EXPIRED, MISSED_REASON, public=False
        )
        run.report.private = LegState.SKIPPED_WINDOW_EXPIRED.value
        return
    await queue_for_budget(conn, delivery.id)
    await kick_pacer(run.resources.queue, [delivery.account_id], at=free_at.timestamp())
    run.report.private = "waiting for budget"


async def _release_slot(
    budget: HourlyBudget, slot: Slot, recorded_as: Sequence[str] = ()
) -> int | None:
    """The slot given back (and under `recorded_as`, `HourlyBudget.release`); the account's
    slots still in flight, when Redis answered."""
    try:
        return await budget.release(slot, recorded_as=recorded_as)
    except (RedisError, OSError):
        logger.warning("could not give back an hourly budget slot of account %s", slot.account_id)
    return None


async def _stamp_slot(
    budget: HourlyBudget, slot: Slot, recorded_as: Sequence[str] = ()
) -> int | None:
    """The slot counted from now (under whichever of its names the budget holds,
    `HourlyBudget.stamp`); the account's slots still in flight, when Redis answered."""
    try:
        return await budget.stamp(slot, recorded_as=recorded_as)
    except (RedisError, OSError):
        # The slot still counts from when it was taken, a moment before the send.
        logger.warning("could not stamp an hourly budget slot of account %s", slot.account_id)
    return None
