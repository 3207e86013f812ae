"""The DM flow: a tap, a DM keyword trigger, a story reply or mention, or a follow-up through
the delivery protocol.

One flow for every row that is sent as a DM to the person's IGSID (`postback`, `message`,
`story_reply`, `story_mention`, `follow_up`), with the comment flow's guarantees (`steps`):
checks → choose the message → one claim statement (quota, attempt row, and for a reveal the
once-per-person claim) → send → classify → one record statement (which also schedules a
reveal's follow-up). Only the worker whose claim returned IN_FLIGHT calls Meta; UNCONFIRMED is
never sent again. The load and checks are `dispatch`'s (`steps.open_run`); `DmFlow` does the
rest.

Choosing the message (`follow_gate.decide`): a follow-up sends its frozen text; a tap, a DM, a
story reply or a story mention sends the link, or — with the follow gate on — checks
`is_user_follow_business` first and sends the link or the follow prompt, or, for a "not
following yet" on the prompt's button, records the check and comes back after the next re-check
delay (the row stays PENDING with `pr_next_attempt_at`, so the due-work relay picks it up if
the scheduled job is lost).

Differences from a private reply, by Meta's rules: no hourly private-reply budget (that limit
is for private replies); the deadline is the 24-hour window the tap, DM, story reply or
story mention opened; 10/2534022
(outside the window) is SKIPPED_WINDOW_EXPIRED, final like on the comment path — a retry
could only be refused again until the person writes or taps anew, which makes a new row.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from app.db.engine import autocommit
from app.db.models import EventLevel, LegState, MessageKind, PersonClaim, TriggerKind
from app.delivery.content import compose, follow_gate
from app.delivery.content.compose import Content
from app.delivery.content.follow_ups import follow_up_for
from app.delivery.content.postbacks import parse_payload
from app.delivery.send import claims, recording
from app.delivery.send.legs import AccountUnable
from app.delivery.send.quota import usage_month
from app.delivery.send.scheduling import enqueue_delivery
from app.delivery.send.steps import Run, hold_for_account, send_claimed, settle
from app.operations import alerts
from app.operations.events import record_event

logger = logging.getLogger("oncereply.delivery")

# Operational INFO events for refused taps, at most this many a minute (anyone can tap).
REFUSAL_EVENTS_PER_MINUTE = 30


# Rows made by something the person wrote: each is answered like a DM keyword trigger.
_MESSAGE_TRIGGERS = frozenset(
    {TriggerKind.MESSAGE, TriggerKind.STORY_REPLY, TriggerKind.STORY_MENTION}
)


@dataclass(frozen=True, slots=True)
class _Choice:
    content: Content
    evidence: dict[str, Any] | None = None
    refused: bool = False  # a prompt tap refused after every re-check


class DmFlow:
    """One tap, DM trigger or follow-up row, from a checked `Run` on (`dispatch` made it)."""

    def __init__(self, run: Run) -> None:
        self._run = run

    async def start(self, conn: AsyncConnection) -> bool:
        """On the connection that loaded the row: settle a follow-up whose campaign turned
        follow-ups off, or a reveal someone else already made; False when so settled."""
        run = self._run
        delivery = run.delivery
        kind = TriggerKind(delivery.trigger_kind)
        if (
            kind is TriggerKind.FOLLOW_UP
            and not delivery.follow_up_enabled
            and delivery.trigger_payload != follow_gate.CHECKING_PAYLOAD
        ):
            reason = "follow-ups were turned off for this campaign"
            await settle(conn, run, LegState.SKIPPED_CAMPAIGN_INACTIVE, reason, public=False)
            return False
        # The load saw whether another row already revealed the link to this person: only
        # then is the settling statement worth running.
        if delivery.revealed_elsewhere and await recording.settle_if_revealed(conn, delivery.id):
            run.report.private = LegState.SKIPPED_DEDUP.value
            run.report.notes.append("this person already got the link")
            return False
        return True

    async def finish(self) -> None:
        """Choose the message (a follow check first, behind the follow gate), then claim and
        send it."""
        choice = await _choose(self._run)
        if choice is not None:
            await _claim_and_send(self._run, choice)


# --- choosing the message -------------------------------------------------------------------


async def _choose(run: Run) -> _Choice | None:
    """The message this row sends now, or None (a re-check was scheduled, or the row was
    settled)."""
    delivery = run.delivery
    kind = TriggerKind(delivery.trigger_kind)
    if kind is TriggerKind.FOLLOW_UP:
        return _Choice(compose.follow_up(delivery.message_text or ""))
    if kind in _MESSAGE_TRIGGERS:
        path = follow_gate.Path.DM_TRIGGER
    else:
        tap = parse_payload(delivery.trigger_payload)
        if tap is None:  # ingest only makes rows for our own payloads; an edited row?
            async with autocommit(run.resources.engine) as conn:
                await settle(conn, run, LegState.FAILED, "the tapped button is not ours")
            return None
        path = follow_gate.tap_path(tap)
    gate = delivery.follow_gate_enabled
    checks: list[Any] = list((delivery.pr_evidence or {}).get("follow_checks") or [])
    follows: bool | None = None
    checked_at = datetime.now(UTC)
    if follow_gate.needs_follow_check(path, follow_gate=gate):
        follows = await run.resources.graph.user_follows_business(
            run.token, delivery.recipient_id or ""
        )
    step = follow_gate.decide(
        path,
        follow_gate=gate,
        follows=follows,
        rechecks_done=len(checks),
        recheck_delays_s=run.resources.settings.follow_recheck_delays_s,
    )
    if step.send is None:
        await _check_again(run, step, seen=len(checks), checked_at=checked_at)
        return None
    texts = delivery.texts()
    content = compose.content_for(
        step.send,
        texts,
        username=delivery.recipient_username,
        frozen_text=None,
        track=run.link_tracker().track,
        direct=True,
    )
    evidence = None
    if gate:
        evidence = {
            "follow_gate": {
                "path": path.value,
                "checked_at": checked_at.isoformat(),
                "follows": follows,
                "sent": step.send.value,
                "why": step.why,
            }
        }
    return _Choice(content, evidence, refused=step.refused)


async def _check_again(
    run: Run, step: follow_gate.GateStep, *, seen: int, checked_at: datetime
) -> None:
    delay = step.recheck_in_s or 0.0
    next_at = datetime.now(UTC) + timedelta(seconds=delay)
    check = {"checked_at": checked_at.isoformat(), "follows": False}
    reason = f"waiting: not following yet; checking again in {delay:g} s (Instagram lags)"
    note: int | None = None
    async with autocommit(run.resources.engine) as conn:
        recorded = await recording.record_follow_check(
            conn, run.delivery.id, seen=seen, check=check, next_at=next_at, reason=reason
        )
        if recorded and seen == 0:
            # The person tapped "I'm following": tell them something now, not in a minute.
            note = await recording.add_checking_note(
                conn,
                run.delivery.id,
                text_=follow_gate.CHECKING_TEXT,
                payload=follow_gate.CHECKING_PAYLOAD,
            )
    if note is not None:
        run.report.notes.append(f"checking note {note} queued")
        await enqueue_delivery(run.resources.queue, note, None, kind=TriggerKind.FOLLOW_UP)
    if recorded:
        run.next_due.append(next_at)
        run.report.private = "checking again"
        run.report.notes.append(step.why)
    else:
        run.report.notes.append("another worker recorded this follow check")


# --- the send -------------------------------------------------------------------------------


async def _claim_and_send(run: Run, choice: _Choice) -> None:
    delivery = run.delivery
    content = choice.content
    reveal = content.kind is MessageKind.REVEAL
    # When the message leaves right after the claim, the claim notes its request.
    note = not choice.refused and content.lead is None
    async with autocommit(run.resources.engine) as conn:
        claim = await claims.claim_private_reply(
            conn,
            dm_log_id=delivery.id,
            worker_id=run.worker_id,
            request_kind=(content.lead or content.message).kind,
            message_text=content.message.text,
            month=usage_month(run.now),
            message_kind=content.kind,
            person=PersonClaim.REVEAL if reveal else None,
            evidence=choice.evidence,
            note_request=note,
        )
        if isinstance(claim, AccountUnable):
            # Another job met a 368 or 190 after this one loaded the row.
            await hold_for_account(conn, run, claim, private=True, public=False)
            run.report.private = run.report.private or "waiting for the account"
            return
    if claim is None or not claim.won:
        run.report.private = claim.state.value if claim is not None else "not claimed"
        return
    if choice.refused:
        await _note_refusal(run)
    await send_claimed(
        run, claim, content, follow_up=follow_up_for(delivery, content.kind), marked=note
    )


async def _note_refusal(run: Run) -> None:
    """One operational INFO event per refused tap: how often Meta's follow lag (or a person
    who did not follow) ends in a second prompt."""
    resources, delivery = run.resources, run.delivery
    allowed, _ = await alerts.allowed(
        resources.redis, "follow_gate_refused", per_minute=REFUSAL_EVENTS_PER_MINUTE
    )
    who = f"@{delivery.recipient_username}" if delivery.recipient_username else "a person"
    checks = len((delivery.pr_evidence or {}).get("follow_checks") or []) + 1
    message = (
        f"follow gate refused a tap: {who} still did not follow after {checks} checks; "
        "the follow prompt was sent again"
    )
    if not allowed:
        logger.info("%s (not recorded: over the per-minute budget)", message)
        return
    try:
        async with resources.sessionmaker() as session, session.begin():
            await record_event(
                session,
                source="delivery",
                level=EventLevel.INFO,
                kind="follow_gate_refused",
                message=message,
                workspace_id=delivery.workspace_id,
                account_id=delivery.account_id,
                details={
                    "dm_log_id": delivery.id,
                    "campaign_id": delivery.campaign_id,
                    "checks": checks,
                },
            )
    except Exception as exc:  # noqa: BLE001 - the prompt matters more than the event
        logger.warning("could not record a follow-gate refusal: %s", exc)
