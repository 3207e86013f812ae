"""Resolving an UNCONFIRMED private reply or DM by looking in the conversation.

The Conversations API shows the 20 newest messages of the thread with the person. A message
there is this row's send only if it cannot be another's:

- it carries this row's message id; or
- this row's request may have left (`pr_requested_at` is set: see
  `app.delivery.send.claims.mark_request_sent`) and the message is from the account to this
  person, has exactly our text, was created after this row's claim (Meta's timestamps have
  whole seconds, so from the claim's second on) and before the send window ended, and no
  other delivery holds its id.

The match is then written with the message id, and a partial unique key on
`(account_id, pr_message_id)` makes sure one message confirms at most one row whatever races
(a credit refused by the key is noted as such). A text match also waits while another
delivery of the same text to the same person is IN_FLIGHT: its answer may yet claim the
message. The evidence
records what matched and why; a miss records what was looked at and what was set aside.
Otherwise the leg stays UNCONFIRMED with "not found in the last N messages" and when that was
checked, for the creator to decide (the dashboard's retry asks for confirmation).

Checks are rate limited by Meta (2 calls/s per account); a throttled check is tried again a
little later, a few times.

A reveal DM (after a tap or a DM trigger) found this way gets its follow-up scheduled by the
same statement that records it SENT, as `recording.record` does for an answered send.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import RowMapping, text
from sqlalchemy.exc import IntegrityError

from app.accounts.tokens import MissingTokenError, open_access_token
from app.crypto import TokenDecryptError
from app.db.engine import autocommit
from app.db.models import InstagramAccount, LegState, MessageKind, TriggerKind
from app.delivery.content.follow_ups import (
    FollowUpPlan,
    follow_up_cte,
    follow_up_params,
    plan_follow_up,
)
from app.delivery.send.scheduling import enqueue_delivery, enqueue_verification
from app.instagram.classify import RETRYABLE_CODES
from app.instagram.graph import GraphApiError, GraphError
from app.resources import Resources

logger = logging.getLogger("oncereply.delivery")

MAX_THROTTLED_CHECKS = 5
THROTTLED_DELAY_S = 30.0
# Clock differences between Meta and us, and the time a send may take.
MATCH_SLACK = timedelta(minutes=2)

_LOAD = text(
    """
SELECT d.pr_state, d.recipient_id, d.message_text, d.pr_message_id, d.pr_claimed_at,
       d.pr_requested_at, d.account_id, d.pr_evidence, a.ig_user_id, a.token_ciphertext,
       a.token_key_id,
       d.trigger_kind, d.message_kind, d.deadline_at, d.recipient_username,
       COALESCE(c.follow_up_enabled, false) AS follow_up_enabled, c.follow_up_text,
       COALESCE(c.follow_up_delay_minutes, 0) AS follow_up_delay_minutes,
       COALESCE(c.buttons, '[]'::jsonb) AS buttons,
       EXISTS (SELECT 1 FROM dm_logs s WHERE s.pr_state = 'IN_FLIGHT'
               AND s.account_id = d.account_id AND s.recipient_id = d.recipient_id
               AND s.message_text = d.message_text AND s.id <> d.id) AS sibling_in_flight
FROM dm_logs d JOIN instagram_accounts a ON a.id = d.account_id
LEFT JOIN campaigns c ON c.id = d.campaign_id
WHERE d.id = :id
"""
)
_CONFIRM = text(
    f"""
WITH confirmed AS (
    UPDATE dm_logs SET pr_state = 'SENT',
        -- A public reply waiting for this DM is due now.
        pub_next_attempt_at = CASE WHEN pub_state = 'PENDING' THEN now()
                              ELSE pub_next_attempt_at END,
        pr_sent_at = COALESCE(pr_sent_at, CAST(:sent_at AS timestamptz)),
        pr_message_id = COALESCE(pr_message_id, :message_id),
        pr_evidence = COALESCE(pr_evidence, '{{}}'::jsonb) || CAST(:evidence AS jsonb),
        updated_at = now()
    WHERE id = :id AND pr_state = 'UNCONFIRMED'
      AND (:by_id OR NOT EXISTS (
          SELECT 1 FROM dm_logs s WHERE s.pr_state = 'IN_FLIGHT'
            AND s.account_id = dm_logs.account_id AND s.recipient_id = dm_logs.recipient_id
            AND s.message_text = dm_logs.message_text AND s.id <> dm_logs.id))
    RETURNING id, workspace_id, account_id, campaign_id, campaign_version, recipient_id,
              recipient_username, pub_state
),
{follow_up_cte("confirmed")}
SELECT (SELECT id FROM confirmed) AS confirmed_id, (SELECT id FROM follow_up) AS follow_up_id,
       (SELECT pub_state = 'PENDING' FROM confirmed) AS public_due,
       (SELECT pr_next_attempt_at FROM follow_up) AS follow_up_due
"""  # noqa: S608 - composed from code; every value is a bound parameter
)
_CREDITED = text(
    "SELECT pr_message_id FROM dm_logs "
    "WHERE account_id = :account_id AND pr_message_id = ANY(:ids) AND id <> :id"
)
_NOTE = text(
    """
UPDATE dm_logs SET pr_evidence = COALESCE(pr_evidence, '{}'::jsonb) || CAST(:evidence AS jsonb),
    updated_at = now()
WHERE id = :id AND pr_state = 'UNCONFIRMED'
"""
)


def _follow_up_of(loaded: RowMapping) -> FollowUpPlan | None:
    """The follow-up a reveal confirmed SENT schedules, from the columns `_LOAD` read for it."""
    message_kind = loaded["message_kind"]
    return plan_follow_up(
        trigger_kind=loaded["trigger_kind"],
        message_kind=MessageKind(message_kind) if message_kind else None,
        enabled=bool(loaded["follow_up_enabled"]),
        text=loaded["follow_up_text"],
        delay_minutes=int(loaded["follow_up_delay_minutes"]),
        deadline_at=loaded["deadline_at"],
        username=loaded["recipient_username"],
        buttons=list(loaded["buttons"] or []),
    )


@dataclass(frozen=True, slots=True)
class VerifyResult:
    status: str  # "confirmed", "not_found", "check_failed", "throttled", "not_unconfirmed",
    # "waiting" (another send to the same person is in flight)
    detail: str = ""


@dataclass(frozen=True, slots=True)
class Sought:
    """What this row's message would look like in the conversation."""

    ig_user_id: str
    recipient: str
    text: str
    message_id: str | None
    # Text matching only when the request may have left; the window it may have arrived in.
    after: datetime | None
    before: datetime | None


@dataclass(frozen=True, slots=True)
class Match:
    """The outcome of looking through the messages: the one found (with why), or what was
    set aside."""

    message: dict[str, Any] | None
    matched_on: str = ""
    why: str = ""
    looked_at: int = 0
    set_aside: dict[str, int] = field(default_factory=dict)

    def miss_detail(self) -> str:
        detail = f"not found in the last {self.looked_at} messages of the conversation"
        if self.set_aside:
            reasons = ", ".join(f"{n} {why}" for why, n in sorted(self.set_aside.items()))
            detail += f" (messages with the same text set aside: {reasons})"
        return detail


async def verify_unconfirmed(resources: Resources, dm_log_id: int) -> VerifyResult:
    now = datetime.now(UTC)
    async with autocommit(resources.engine) as conn:
        row = (await conn.execute(_LOAD, {"id": dm_log_id})).first()
    if row is None or row.pr_state != LegState.UNCONFIRMED:
        return VerifyResult("not_unconfirmed")
    loaded = row._mapping
    if loaded["sibling_in_flight"]:
        return await _wait_for_sibling(resources, dm_log_id, now, loaded)
    ig_user_id = loaded["ig_user_id"]
    previous = (loaded["pr_evidence"] or {}).get("inbox_check") or {}
    try:
        token = open_access_token(
            resources.cipher,
            InstagramAccount(
                ig_user_id=ig_user_id,
                token_ciphertext=loaded["token_ciphertext"],
                token_key_id=loaded["token_key_id"],
            ),
        )
        messages = await _conversation(resources, token, ig_user_id, loaded["recipient_id"])
    except GraphApiError as exc:
        throttled = int(previous.get("throttled", 0))
        if exc.code in RETRYABLE_CODES and throttled < MAX_THROTTLED_CHECKS:
            await _note(resources, dm_log_id, now, {"throttled": throttled + 1})
            await enqueue_verification(
                resources.queue, dm_log_id, delay_s=THROTTLED_DELAY_S, again=True
            )
            return VerifyResult("throttled", str(exc))
        return await _failed(resources, dm_log_id, now, str(exc))
    except (GraphError, MissingTokenError, TokenDecryptError) as exc:
        return await _failed(resources, dm_log_id, now, str(exc))
    sought = _sought(loaded, resources.settings.send_timeout_s)
    credited = await _credited(resources, dm_log_id, loaded["account_id"], messages)
    found = pick_match(messages, sought, credited) if sought is not None else Match(None)
    if found.message is None:
        detail = found.miss_detail()
        if sought is not None and sought.after is None:
            detail += "; not looked for by its text, since its request never left"
        await _note(resources, dm_log_id, now, {"result": "not_found", "detail": detail})
        return VerifyResult("not_found", detail)
    return await _confirm(resources, dm_log_id, now, loaded, found)


async def _confirm(
    resources: Resources, dm_log_id: int, now: datetime, loaded: RowMapping, found: Match
) -> VerifyResult:
    message = found.message or {}
    proof = {
        "confirmed_by": "conversations_api",
        "confirmed_at": now.isoformat(),
        "message_id": message.get("id"),
        "created_time": message.get("created_time"),
        "matched_on": found.matched_on,
        "matched_why": found.why,
    }
    plan = _follow_up_of(loaded)
    try:
        async with autocommit(resources.engine) as conn:
            confirmed = (
                await conn.execute(
                    _CONFIRM,
                    {
                        "id": dm_log_id,
                        "by_id": found.matched_on == "message_id",
                        "sent_at": _parse_time(message.get("created_time")) or now,
                        "message_id": message.get("id"),
                        "evidence": json.dumps(
                            {"inbox_check": {"result": "found", **proof}, **proof}
                        ),
                        **follow_up_params(plan),
                    },
                )
            ).first()
    except IntegrityError:
        # The unique key: between the look and the write another row took this message.
        detail = "the message found was credited to another delivery first"
        await _note(resources, dm_log_id, now, {"result": "not_found", "detail": detail})
        return VerifyResult("not_found", detail)
    if confirmed is None or confirmed.confirmed_id is None:
        if loaded["pr_state"] == LegState.UNCONFIRMED and found.matched_on == "text":
            return await _wait_for_sibling(resources, dm_log_id, now, loaded)
        return VerifyResult("not_unconfirmed")
    if confirmed.follow_up_id is not None:
        await enqueue_delivery(
            resources.queue,
            confirmed.follow_up_id,
            confirmed.follow_up_due,
            kind=TriggerKind.FOLLOW_UP,
        )
    if confirmed.public_due:
        await enqueue_delivery(resources.queue, dm_log_id, None)
    return VerifyResult("confirmed", str(message.get("id")))


async def _wait_for_sibling(
    resources: Resources, dm_log_id: int, now: datetime, loaded: RowMapping
) -> VerifyResult:
    """Another delivery to the same person is being sent: its answer may claim the message
    this check would find, so look again once it is done."""
    previous = (loaded["pr_evidence"] or {}).get("inbox_check") or {}
    waited = int(previous.get("waited", 0))
    if waited >= MAX_THROTTLED_CHECKS:
        detail = "another DM to the same person stayed in flight; not matched by text"
        await _note(resources, dm_log_id, now, {"result": "not_found", "detail": detail})
        return VerifyResult("not_found", detail)
    detail = "waiting for another DM to the same person to finish sending"
    await _note(resources, dm_log_id, now, {"waited": waited + 1, "detail": detail})
    await enqueue_verification(resources.queue, dm_log_id, delay_s=THROTTLED_DELAY_S, again=True)
    return VerifyResult("waiting", detail)


def _sought(loaded: RowMapping, send_timeout_s: float) -> Sought | None:
    recipient = loaded["recipient_id"]
    if not recipient:
        return None
    claimed_at, requested_at = loaded["pr_claimed_at"], loaded["pr_requested_at"]
    after = before = None
    if requested_at is not None and claimed_at is not None:
        after = claimed_at.replace(microsecond=0)
        before = claimed_at + timedelta(seconds=2 * send_timeout_s) + MATCH_SLACK
    return Sought(
        ig_user_id=str(loaded["ig_user_id"]),
        recipient=str(recipient),
        text=_normal(loaded["message_text"] or ""),
        message_id=loaded["pr_message_id"],
        after=after,
        before=before,
    )


async def _conversation(
    resources: Resources, token: str, ig_user_id: str, recipient: str | None
) -> list[dict[str, Any]]:
    if not recipient:
        return []
    conversation = await resources.graph.find_conversation_id(token, ig_user_id, recipient)
    if conversation is None:
        return []
    return await resources.graph.conversation_messages(token, conversation)


async def _credited(
    resources: Resources, dm_log_id: int, account_id: int, messages: list[dict[str, Any]]
) -> set[str]:
    """The ids among `messages` that other deliveries of the account already hold."""
    ids = [str(m["id"]) for m in messages if m.get("id")]
    if not ids:
        return set()
    async with autocommit(resources.engine) as conn:
        rows = await conn.execute(
            _CREDITED, {"account_id": account_id, "ids": ids, "id": dm_log_id}
        )
        return {str(r.pr_message_id) for r in rows}


def pick_match(messages: list[dict[str, Any]], sought: Sought, credited: set[str]) -> Match:
    """The message that is this row's send, newest first as Meta lists them, or why none."""
    set_aside: dict[str, int] = {}
    for message in messages:
        message_id = str(message.get("id") or "")
        if sought.message_id and message_id == sought.message_id:
            return Match(message, "message_id", "it carries this DM's message id", len(messages))
        if sought.after is None or sought.before is None or not sought.text:
            continue
        if _party_id(message.get("from")) != sought.ig_user_id:
            continue
        if _normal(str(message.get("message") or "")) != sought.text:
            continue
        aside = _set_aside(message, message_id, sought, credited)
        if aside:
            set_aside[aside] = set_aside.get(aside, 0) + 1
            continue
        why = (
            f"the same text, from the account to this person, created at "
            f"{message.get('created_time')}, after this DM was claimed "
            f"({sought.after.isoformat()}), and held by no other delivery"
        )
        return Match(message, "text", why, len(messages), set_aside)
    return Match(None, looked_at=len(messages), set_aside=set_aside)


def _set_aside(message: dict[str, Any], message_id: str, sought: Sought, credited: set[str]) -> str:
    """Why a message with our text is not ours ("" when it may be)."""
    if sought.recipient not in _recipient_ids(message.get("to")):
        return "sent to someone else"
    if message_id in credited:
        return "already credited to another delivery"
    created = _parse_time(message.get("created_time"))
    if created is None:
        return "without a creation time"
    if sought.after is not None and created < sought.after:
        return "sent before this DM was claimed"
    if sought.before is not None and created > sought.before:
        return "sent after this DM's send window"
    return ""


def _party_id(party: object) -> str:
    return str(party.get("id", "")) if isinstance(party, dict) else ""


def _recipient_ids(to: object) -> set[str]:
    data = to.get("data") if isinstance(to, dict) else None
    if not isinstance(data, list):
        return set()
    return {_party_id(party) for party in data}


def _normal(value: str) -> str:
    return " ".join(value.split())


def _parse_time(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.strptime(value, "%Y-%m-%dT%H:%M:%S%z")
    except ValueError:
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            return None


async def _note(resources: Resources, dm_log_id: int, now: datetime, check: dict[str, Any]) -> None:
    payload = {"inbox_check": {"checked_at": now.isoformat(), **check}}
    async with autocommit(resources.engine) as conn:
        await conn.execute(_NOTE, {"id": dm_log_id, "evidence": json.dumps(payload)})


async def _failed(resources: Resources, dm_log_id: int, now: datetime, why: str) -> VerifyResult:
    await _note(resources, dm_log_id, now, {"result": "check_failed", "detail": why[:300]})
    logger.info("inbox check of %s failed: %s", dm_log_id, why)
    return VerifyResult("check_failed", why)
