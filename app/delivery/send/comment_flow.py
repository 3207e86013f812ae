"""The comment flow: a comment's public reply and private reply through the delivery protocol.

Order: load (row, campaign, account in one query) → checks (campaign active, account able to
send, deadline) → public-reply leg → private-reply leg: hourly slot (Redis) → one claim
statement (person, quota, leg, attempt row) → send → classify → one record statement → give
back the slot on a definite answer. Only the worker whose claim returned IN_FLIGHT calls Meta.
The load and checks are `dispatch`'s (`steps.open_run`); `CommentFlow` does the rest.

A public reply that says a DM was sent is posted only once the DM is SENT (the campaign's
`public_reply_after_dm`, on by default): the private leg goes first and, if it is not SENT in
this run, the public leg waits (`recording.hold_public`) until a run that sends the DM (a
retry) or the inbox check that confirms it makes it due. A reply that does not mention the DM
(the setting off) goes first, whatever becomes of the DM.

An answer to the public reply that stops the whole account (368 pause, 190 token) also stops
the private reply of the same job: it stays PENDING until the account can send again, as work
found waiting on a paused account at load does.

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
from app.delivery.send.budget import BudgetFull, HourlyBudget, Slot
from app.delivery.send.legs import AccountUnable, Claim, Delivery, LegUpdate
from app.delivery.send.outcomes import call_report
from app.delivery.send.quota import usage_month
from app.delivery.send.steps import (
    REAUTH_WAIT,
    REDIS_WAIT,
    Run,
    elapsed_ms,
    failure,
    hold_for_account,
    mark_request,
    record,
    send_claimed,
)
from app.instagram.classify import Verdict, classify_error
from app.instagram.graph import GraphError

logger = logging.getLogger("oncereply.delivery")

# Spread the wake-ups of work waiting for the same freed budget slot.
BUDGET_JITTER_S = 30.0


class CommentFlow:
    """One comment row's legs, from a checked `Run` on (`dispatch` made it)."""

    def __init__(self, run: Run) -> None:
        self._run = run
        self._held: _Held | None = None

    @property
    def _dm_first(self) -> bool:
        return self._run.delivery.public_reply_after_dm

    async def start(self, conn: AsyncConnection) -> bool:
        """On the connection that loaded the row: claim the private reply when it goes first
        (the common case, so it costs no second connection)."""
        run = self._run
        if run.pr_due and (self._dm_first or not run.pub_due):
            self._held = await _claim_private(conn, run)
        return True

    async def finish(self) -> None:
        """The public reply first if it does not wait for the DM, the private reply's claim if
        not made yet, the send under a won claim, then a public reply that waited for it."""
        run = self._run
        if run.pub_due and not self._dm_first:
            account_stopped = await _public_leg(run)
            if run.pr_due and not account_stopped:
                async with autocommit(run.resources.engine) as conn:
                    self._held = await _claim_private(conn, run)
        held = self._held
        sent = False
        if held is not None:
            verdict = await send_claimed(run, held.claim, held.content)
            sent = verdict is None
            if verdict is not None and verdict.definite:
                await _release_slot(_budget(run), held.slot)
        if self._dm_first and run.delivery.pub_state is LegState.PENDING:
            await self._public_after_dm(sent_now=sent)

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


def comment_content(delivery: Delivery) -> Content:
    """The private reply: the link, or a two-step campaign's opening DM or follow prompt."""
    kind = follow_gate.comment_reply(
        opening_dm=delivery.opening_dm_enabled, follow_gate=delivery.follow_gate_enabled
    )
    return compose.content_for(
        kind, delivery.texts(), username=delivery.recipient_username, frozen_text=None
    )


# --- the public reply ------------------------------------------------------------------------


async def _public_leg(run: Run) -> bool:
    """Post the public reply; true when the account cannot send now (its answer was a 368 or
    a 190, or its claim was refused for another job's), the private leg then being held too."""
    delivery = run.delivery
    variants = [v for v in delivery.public_replies if v.strip()]
    # Variety, not secrecy: any generator will do for picking a variant.
    chosen = random.choice(variants) if variants else ""  # noqa: S311
    reply = render(chosen, username=delivery.recipient_username, link=None) if chosen else ""
    async with autocommit(run.resources.engine) as conn:
        if not reply:
            await recording.settle_pending(
                conn, delivery.id, LegState.FAILED, "the campaign has no public reply text",
                private=False,
            )  # fmt: skip
            run.report.public = LegState.FAILED.value
            return False
        claim = await claims.claim_public_reply(
            conn, dm_log_id=delivery.id, worker_id=run.worker_id, reply_text=reply
        )
        if isinstance(claim, AccountUnable):
            # Another job met a 368 or 190 after this one loaded the row.
            await hold_for_account(conn, run, claim, private=run.pr_due, public=True)
            run.report.public = "waiting for the account"
            return True
    if claim is None:
        run.report.public = "not claimed"
        return False
    if not await mark_request(run, claim):
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
    report = call_report(verdict, elapsed_ms(started))
    if verdict is None:
        update = LegUpdate(LegState.SENT, message_id=reply_id)
    else:
        update = await failure(run, claim, verdict, private=False)
    await record(run, claim, report, update)
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


# --- the private reply ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Held:
    """A won private-reply claim, the hourly slot reserved for it and the message to send."""

    claim: Claim
    slot: Slot
    content: Content


def _budget(run: Run) -> HourlyBudget:
    return HourlyBudget(run.resources.redis, limit=run.resources.settings.private_replies_per_hour)


async def _claim_private(conn: AsyncConnection, run: Run) -> _Held | None:
    delivery, now = run.delivery, run.now
    content = comment_content(delivery)
    budget = _budget(run)
    try:
        reserved = await budget.reserve(delivery.account_id, tag=str(delivery.id))
    except (RedisError, OSError):
        reason = "waiting: the hourly budget (Redis) is unavailable"
        await recording.postpone(conn, delivery.id, now + REDIS_WAIT, reason, public=False)
        run.report.notes.append(reason)
        return None
    if isinstance(reserved, BudgetFull):
        await _budget_full(conn, run, reserved)
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
    )
    if isinstance(claim, AccountUnable):
        await _release_slot(budget, reserved)
        await hold_for_account(conn, run, claim, private=True, public=False)
        run.report.private = run.report.private or "waiting for the account"
        return None
    if claim is None or not claim.won:
        await _release_slot(budget, reserved)
        run.report.private = claim.state.value if claim is not None else "not claimed"
        return None
    return _Held(claim, reserved, content)


async def _budget_full(conn: AsyncConnection, run: Run, full: BudgetFull) -> None:
    delivery = run.delivery
    jitter = random.uniform(0, BUDGET_JITTER_S)  # noqa: S311 - spreading wake-ups, not secrecy
    free_at = run.now + timedelta(seconds=full.wait_s + jitter)
    if delivery.deadline_at is not None and free_at >= delivery.deadline_at:
        reason = "the hourly private-reply budget stays full until the 7-day window closes"
        await recording.settle_pending(
            conn, delivery.id, LegState.SKIPPED_WINDOW_EXPIRED, reason, public=False
        )
        run.report.private = LegState.SKIPPED_WINDOW_EXPIRED.value
        return
    reason = "waiting for a slot in the account's hourly private-reply budget"
    await recording.postpone(conn, delivery.id, free_at, reason, public=False)
    run.report.private = "waiting for budget"
    run.next_due.append(free_at)


async def _release_slot(budget: HourlyBudget, slot: Slot) -> None:
    try:
        await budget.release(slot)
    except (RedisError, OSError):
        logger.warning("could not give back an hourly budget slot of account %s", slot.account_id)
