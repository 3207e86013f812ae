"""Resolving an UNCONFIRMED private reply or DM by looking in the conversation.

The Conversations API shows the 20 newest messages of the thread with the commenter. A
message from the account that carries our message id, or our exact text and was created
between the claim and the end of the send window, is the send we were unsure about: the leg
becomes SENT with the evidence noted. Otherwise the leg stays UNCONFIRMED with "not found in
the last N messages" and when that was checked, for the creator to decide (the dashboard's
retry asks for confirmation).

Checks are rate limited by Meta (2 calls/s per account); a throttled check is tried again a
little later, a few times.

A reveal DM (after a tap or a DM trigger) found this way gets its follow-up scheduled by the
same statement that records it SENT, as `recording.record` does for an answered send.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import RowMapping, text

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
       d.pr_evidence, a.ig_user_id, a.token_ciphertext, a.token_key_id,
       d.trigger_kind, d.message_kind, d.deadline_at, d.recipient_username,
       COALESCE(c.follow_up_enabled, false) AS follow_up_enabled, c.follow_up_text,
       COALESCE(c.follow_up_delay_minutes, 0) AS follow_up_delay_minutes,
       COALESCE(c.buttons, '[]'::jsonb) AS buttons
FROM dm_logs d JOIN instagram_accounts a ON a.id = d.account_id
LEFT JOIN campaigns c ON c.id = d.campaign_id
WHERE d.id = :id
"""
)
_CONFIRM = text(
    f"""
WITH confirmed AS (
    UPDATE dm_logs SET pr_state = 'SENT',
        pr_sent_at = COALESCE(pr_sent_at, CAST(:sent_at AS timestamptz)),
        pr_message_id = COALESCE(pr_message_id, :message_id),
        pr_evidence = COALESCE(pr_evidence, '{{}}'::jsonb) || CAST(:evidence AS jsonb),
        updated_at = now()
    WHERE id = :id AND pr_state = 'UNCONFIRMED'
    RETURNING id, workspace_id, account_id, campaign_id, campaign_version, recipient_id,
              recipient_username
),
{follow_up_cte("confirmed")}
SELECT (SELECT id FROM confirmed) AS confirmed_id, (SELECT id FROM follow_up) AS follow_up_id,
       (SELECT pr_next_attempt_at FROM follow_up) AS follow_up_due
"""  # noqa: S608 - composed from code; every value is a bound parameter
)
_NOTE = text(
    """
UPDATE dm_logs SET pr_evidence = COALESCE(pr_evidence, '{}'::jsonb) || CAST(:evidence AS jsonb),
    updated_at = now()
WHERE id = :id AND pr_state = 'UNCONFIRMED'
"""
)


@dataclass(frozen=True, slots=True)
class VerifyResult:
    status: str  # "confirmed", "not_found", "check_failed", "throttled", "not_unconfirmed"
    detail: str = ""


async def verify_unconfirmed(resources: Resources, dm_log_id: int) -> VerifyResult:
    now = datetime.now(UTC)
    async with autocommit(resources.engine) as conn:
        row = (await conn.execute(_LOAD, {"id": dm_log_id})).first()
    if row is None or row.pr_state != LegState.UNCONFIRMED:
        return VerifyResult("not_unconfirmed")
    loaded = row._mapping
    ig_user_id, message_id = loaded["ig_user_id"], loaded["pr_message_id"]
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
        found, checked = await _search(
            resources,
            token,
            ig_user_id=ig_user_id,
            recipient=loaded["recipient_id"],
            sent_text=loaded["message_text"],
            message_id=message_id,
            claimed_at=loaded["pr_claimed_at"],
        )
    except GraphApiError as exc:
        throttled = int(previous.get("throttled", 0))
        if exc.code in RETRYABLE_CODES and throttled < MAX_THROTTLED_CHECKS:
            await _note(resources, dm_log_id, now, {"throttled": throttled + 1})
            await enqueue_verification(resources.queue, dm_log_id, delay_s=THROTTLED_DELAY_S)
            return VerifyResult("throttled", str(exc))
        return await _failed(resources, dm_log_id, now, str(exc))
    except (GraphError, MissingTokenError, TokenDecryptError) as exc:
        return await _failed(resources, dm_log_id, now, str(exc))
    if found is None:
        detail = f"not found in the last {checked} messages of the conversation"
        await _note(resources, dm_log_id, now, {"result": "not_found", "detail": detail})
        return VerifyResult("not_found", detail)
    proof = {
        "confirmed_by": "conversations_api",
        "confirmed_at": now.isoformat(),
        "message_id": found.get("id"),
        "created_time": found.get("created_time"),
        "matched_on": "message_id" if message_id and found.get("id") == message_id else "text",
    }
    plan = _follow_up_of(loaded)
    async with autocommit(resources.engine) as conn:
        confirmed = (
            await conn.execute(
                _CONFIRM,
                {
                    "id": dm_log_id,
                    "sent_at": _parse_time(found.get("created_time")) or now,
                    "message_id": found.get("id"),
                    "evidence": json.dumps({"inbox_check": {"result": "found", **proof}, **proof}),
                    **follow_up_params(plan),
                },
            )
        ).first()
    if confirmed is not None and confirmed.follow_up_id is not None:
        await enqueue_delivery(
            resources.queue,
            confirmed.follow_up_id,
            confirmed.follow_up_due,
            kind=TriggerKind.FOLLOW_UP,
        )
    return VerifyResult("confirmed", str(found.get("id")))


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


async def _search(
    resources: Resources,
    token: str,
    *,
    ig_user_id: str,
    recipient: str | None,
    sent_text: str | None,
    message_id: str | None,
    claimed_at: datetime | None,
) -> tuple[dict[str, Any] | None, int]:
    if not recipient:
        return None, 0
    conversation = await resources.graph.find_conversation_id(token, ig_user_id, recipient)
    if conversation is None:
        return None, 0
    messages = await resources.graph.conversation_messages(token, conversation)
    window_start = (claimed_at - MATCH_SLACK) if claimed_at else None
    window_end = (
        claimed_at + timedelta(seconds=2 * resources.settings.send_timeout_s) + MATCH_SLACK
        if claimed_at
        else None
    )
    wanted = _normal(sent_text or "")
    for message in messages:
        if message_id and message.get("id") == message_id:
            return message, len(messages)
        sender = message.get("from")
        if not isinstance(sender, dict) or str(sender.get("id", "")) != ig_user_id or not wanted:
            continue
        if _normal(str(message.get("message") or "")) != wanted:
            continue
        created = _parse_time(message.get("created_time"))
        if (
            created is not None
            and window_start is not None
            and window_end is not None
            and not window_start <= created <= window_end
        ):
            continue
        return message, len(messages)
    return None, len(messages)


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
