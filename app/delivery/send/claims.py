"""Reading a row to deliver, and claiming its legs: each ONE SQL statement.

- `load_delivery`: the log row with its campaign, account and workspace, in one query, its
  columns labelled with the names of `Delivery`'s fields.
- `claim_private_reply`: locks the row only if its private-reply (or DM) leg is PENDING, due
  and within its attempt budget, and in the same statement claims the person for the campaign
  (INSERT … ON CONFLICT on `campaign_recipients`, for the purpose the message serves: the
  comment's private reply, or the reveal after a tap or a DM; prompts and follow-ups claim no
  person), reserves the monthly quota when the workspace has one (conditional upsert), moves
  the leg to IN_FLIGHT (or SKIPPED_DEDUP / SKIPPED_QUOTA) and inserts the `delivery_attempts`
  row. Of any number of racing workers exactly one gets IN_FLIGHT back; only that one may call
  Meta.
- `claim_public_reply`: the same for the public-reply leg (no person, no quota).
- Both claim only while the account can send (active, or an automatic pause that has run
  out, as `account_state.gate_for` reads it): a 368 or 190 that another job met after this
  one loaded the row stops it here. Such a refusal comes back from the same statement as
  `AccountUnable`, so the caller can keep the work waiting without another query.
- `mark_request_sent`: a leg's holder notes, just before each request to Meta leaves, that it
  is about to (a private reply whose message leaves right after its claim has the note
  written by the claim itself, `note_request`): while `pr_requested_at` (`pub_requested_at`)
  is NULL nothing can have been sent, so a claim abandoned then (a worker killed, its
  database lost) is retried safely instead of ending UNCONFIRMED. Conditional on the claim
  (worker and attempt number) like `record`, it is also the fence against a sender the
  stale-claim sweep has already taken the leg from: it sends only if the mark is written. It
  locks the row, so it and the sweep never pass each other: either the sweep sees the mark,
  or the mark sees the leg gone.

They run on autocommit connections (`app.db.engine.autocommit`): every statement is its own
transaction, so a delivery costs one round trip per statement and no BEGIN/COMMIT. The load,
the claims and the request note, run once or more for every delivery, go through the driver
(`app.db.raw.driver_of`), skipping SQLAlchemy's execution and result layers. What happens
after the call (recording, settling, postponing) is in `recording`.

A person claim is held by a log row while that row may still deliver or has delivered
(PENDING, IN_FLIGHT, SENT, UNCONFIRMED). A row that ended without delivering gives it up
(`recording.record` deletes it), and should that ever be skipped (a crash), a later claim may
take over a claim whose holder is in such a dead state, so no fan is locked out by a failure.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from datetime import date
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from app.db.models import Leg, LegState, MessageKind, PersonClaim
from app.db.raw import driver_of, fetch_one, fetch_one_dict, psycopg_sql
from app.delivery.send.legs import MAX_PUBLIC_ATTEMPTS, AccountUnable, Claim, Delivery
from app.delivery.send.quota import RESERVE_UPSERT

__all__ = [
    "DEAD_LIST",
    "DUE_TOLERANCE",
    "REVEALED_ELSEWHERE",
    "claim_private_reply",
    "claim_public_reply",
    "earlier_attempt_ambiguous",
    "load_delivery",
    "mark_request_sent",
]

# A job scheduled for a due time may start a moment early (SAQ schedules in whole seconds).
DUE_TOLERANCE = "interval '1 second'"
_DEAD_STATES = tuple(
    state.value
    for state in LegState
    if state not in (LegState.PENDING, LegState.IN_FLIGHT, LegState.SENT, LegState.UNCONFIRMED)
)
# The leg states of a row that ended without delivering: its person claim is free to take.
DEAD_LIST = ", ".join(f"'{state}'" for state in _DEAD_STATES)
# The account `a` can send, as `account_state.gate_for` says (SEND), NULL-safe so NOT works.
_ACCOUNT_CAN_SEND = """COALESCE(a.status = 'active' OR (a.status = 'paused'
    AND a.paused_until IS NOT NULL AND a.paused_until <= now()), false)"""
# The second part of a claim's answer: the account's state when it refused the claim.
_ACCOUNT_REFUSAL = f"""
SELECT {{nulls}}, a.status, a.paused_until
FROM dm_logs d JOIN instagram_accounts a ON a.id = d.account_id
WHERE d.id = :id AND NOT {_ACCOUNT_CAN_SEND}"""  # noqa: S608 - module constants only
# Another row of this campaign already gave the person the link, or is giving it (the `d` row
# being a tap or a DM of a once-per-person campaign).
REVEALED_ELSEWHERE = f"""EXISTS (
    SELECT 1 FROM campaign_recipients cr JOIN dm_logs h ON h.id = cr.dm_log_id
    WHERE cr.campaign_id = d.campaign_id AND cr.recipient_id = d.recipient_id
      AND cr.purpose = '{PersonClaim.REVEAL.value}' AND h.id <> d.id
      AND h.pr_state IN ('SENT', 'UNCONFIRMED', 'IN_FLIGHT'))"""  # noqa: S608 - constants


# --- load --------------------------------------------------------------------------------

# Every column is named as the `Delivery` field it fills.
_DELIVERY_FIELDS = tuple(field.name for field in dataclasses.fields(Delivery))
_LOAD = psycopg_sql(
    f"""
SELECT d.id, d.workspace_id, d.account_id, d.campaign_id, d.trigger_kind, d.trigger_id,
       d.recipient_id, d.recipient_username, d.deadline_at,
       d.pr_state, d.pr_attempts, d.pr_attempt_limit, d.pr_next_attempt_at, d.pr_evidence,
       d.pub_state, d.pub_attempts, d.pub_next_attempt_at,
       a.ig_user_id, a.status AS account_status, a.paused_until, a.token_ciphertext,
       a.token_key_id,
       c.status AS campaign_status,
       COALESCE(c.dm_text, '') AS dm_text,
       COALESCE(c.buttons, '[]'::jsonb) AS buttons,
       COALESCE(c.public_replies, '{{}}') AS public_replies,
       COALESCE(c.public_reply_after_dm, true) AS public_reply_after_dm,
       COALESCE(c.public_reply_skip_in_backlog, false) AS public_reply_skip_in_backlog,
       COALESCE(c.once_per_person, true) AS once_per_person,
       d.trigger_payload, d.source_log_id, d.message_text, d.message_kind,
       COALESCE(c.opening_dm_enabled, false) AS opening_dm_enabled,
       c.opening_dm_text, c.opening_dm_button_title,
       COALESCE(c.follow_gate_enabled, false) AS follow_gate_enabled,
       c.follow_prompt_text, c.follow_prompt_button_title,
       COALESCE(c.follow_up_enabled, false) AS follow_up_enabled,
       c.follow_up_text,
       COALESCE(c.follow_up_delay_minutes, 0) AS follow_up_delay_minutes,
       CASE WHEN d.trigger_kind IN ('postback', 'message', 'story_reply', 'story_mention')
                 AND d.pr_state = 'PENDING'
                 AND c.once_per_person
            THEN {REVEALED_ELSEWHERE} ELSE false END AS revealed_elsewhere,
       d.pr_granted_at, a.pr_backlog_since IS NOT NULL AS account_backlog,
       d.pub_granted_at, a.pub_backlog_since IS NOT NULL AS public_backlog,
       COALESCE(c.name, '') AS campaign_name,
       COALESCE(c.utm_enabled, false) AS utm_enabled,
       c.dm_image_url, COALESCE(c.card_enabled, false) AS card_enabled,
       c.card_title, c.card_subtitle
FROM dm_logs d
JOIN instagram_accounts a ON a.id = d.account_id
LEFT JOIN campaigns c ON c.id = d.campaign_id
WHERE d.id = :id
"""  # noqa: S608 - composed from module constants; the only value is a bound parameter
)


async def load_delivery(conn: AsyncConnection, dm_log_id: int) -> Delivery | None:
    row = await fetch_one_dict(await driver_of(conn), _LOAD, {"id": dm_log_id})
    return _delivery(row) if row is not None else None


def _delivery(columns: Mapping[str, Any]) -> Delivery:
    """`_LOAD`'s row as a `Delivery`: each field from the column of its name, the enums made."""
    # Keyed by the field names themselves: interned, they match the parameters at once.
    fields = {name: columns[name] for name in _DELIVERY_FIELDS}
    pub_state, message_kind = fields["pub_state"], fields["message_kind"]
    ciphertext = fields["token_ciphertext"]
    fields |= {
        "pr_state": LegState(fields["pr_state"]),
        "pub_state": LegState(pub_state) if pub_state else None,
        "message_kind": MessageKind(message_kind) if message_kind else None,
        "token_ciphertext": bytes(ciphertext) if ciphertext is not None else None,
        "buttons": list(fields["buttons"] or []),
        "public_replies": list(fields["public_replies"] or []),
    }
    return Delivery(**fields)


# --- claims ------------------------------------------------------------------------------


_CLAIM_PRIVATE = psycopg_sql(
    f"""
WITH target AS (
    SELECT d.id, d.workspace_id, d.campaign_id, d.recipient_id,
           (CAST(:purpose AS varchar) IS NOT NULL
            AND d.campaign_id IS NOT NULL AND d.recipient_id IS NOT NULL
            AND COALESCE(c.once_per_person, true)) AS once,
           w.monthly_dm_quota IS NOT NULL AS capped
    FROM dm_logs d JOIN instagram_accounts a ON a.id = d.account_id
    JOIN workspaces w ON w.id = d.workspace_id
    LEFT JOIN campaigns c ON c.id = d.campaign_id
    WHERE d.id = :id AND d.pr_state = 'PENDING' AND d.pr_attempts < d.pr_attempt_limit
      AND (d.pr_next_attempt_at IS NULL OR d.pr_next_attempt_at <= now() + {DUE_TOLERANCE})
      AND {_ACCOUNT_CAN_SEND}
    FOR UPDATE OF d
),
person AS (
    INSERT INTO campaign_recipients AS cr (campaign_id, recipient_id, purpose, dm_log_id)
    SELECT t.campaign_id, t.recipient_id, CAST(:purpose AS varchar), t.id FROM target t
    WHERE t.once
    ON CONFLICT (campaign_id, recipient_id, purpose)
    DO UPDATE SET dm_log_id = EXCLUDED.dm_log_id
    WHERE cr.dm_log_id = EXCLUDED.dm_log_id
       OR NOT EXISTS (SELECT 1 FROM dm_logs h WHERE h.id = cr.dm_log_id
                      AND h.pr_state NOT IN ({DEAD_LIST}))
    RETURNING cr.dm_log_id
),
person_ok AS (
    SELECT t.id, (NOT t.once OR EXISTS (SELECT 1 FROM person)) AS ok FROM target t
),
quota AS (
    {
        RESERVE_UPSERT.format(
            source="SELECT t.workspace_id, CAST(:month AS date), 1 FROM target t "
            "JOIN person_ok p ON p.id = t.id JOIN workspaces w ON w.id = t.workspace_id "
            "WHERE p.ok AND t.capped AND w.monthly_dm_quota >= 1"
        )
    }
),
verdict AS (
    SELECT p.id,
           CASE WHEN NOT p.ok THEN 'SKIPPED_DEDUP'
                WHEN t.capped AND NOT EXISTS (SELECT 1 FROM quota) THEN 'SKIPPED_QUOTA'
                ELSE 'IN_FLIGHT' END AS state
    FROM person_ok p JOIN target t ON t.id = p.id
),
leg AS (
    UPDATE dm_logs d SET
        pr_state = v.state,
        pr_attempts = d.pr_attempts + CASE WHEN v.state = 'IN_FLIGHT' THEN 1 ELSE 0 END,
        pr_claimed_at = now(),
        pr_claimed_by = :worker,
        pr_requested_at = CASE WHEN v.state = 'IN_FLIGHT' AND CAST(:note AS boolean)
            THEN now() END,
        pr_next_attempt_at = NULL,
        pr_granted_at = NULL,
        message_text = CASE WHEN v.state = 'IN_FLIGHT' THEN :text ELSE d.message_text END,
        message_kind = :message_kind,
        pr_error_code = NULL,
        pr_error_subcode = NULL,
        pr_error_message = CASE
            WHEN v.state = 'SKIPPED_DEDUP' AND CAST(:purpose AS varchar) = 'reveal'
                THEN 'this person already got this campaign''s link'
            WHEN v.state = 'SKIPPED_DEDUP' THEN 'this campaign already messaged this person'
            WHEN v.state = 'SKIPPED_QUOTA' THEN 'the workspace''s monthly DM quota is used up'
            ELSE NULL END,
        pr_evidence = CASE WHEN CAST(:evidence AS jsonb) IS NULL THEN d.pr_evidence
            ELSE COALESCE(d.pr_evidence, '{{}}'::jsonb) || CAST(:evidence AS jsonb) END,
        updated_at = now()
    FROM verdict v WHERE d.id = v.id
    RETURNING d.pr_state, d.pr_attempts
),
attempt AS (
    INSERT INTO delivery_attempts (dm_log_id, leg, attempt_no, request_kind, worker_id)
    SELECT :id, 'private_reply', l.pr_attempts, :kind, :worker FROM leg l
    WHERE l.pr_state = 'IN_FLIGHT'
    RETURNING id
)
SELECT l.pr_state AS state, l.pr_attempts AS attempt_no, (SELECT id FROM attempt) AS attempt_id,
       (SELECT month FROM quota) AS quota_month,
       NULL AS account_status, CAST(NULL AS timestamptz) AS paused_until
FROM leg l
UNION ALL {_ACCOUNT_REFUSAL.format(nulls="NULL, NULL, NULL, CAST(NULL AS date)")}
"""  # noqa: S608 - composed from module constants; every value is a bound parameter
)


async def claim_private_reply(
    conn: AsyncConnection,
    *,
    dm_log_id: int,
    worker_id: str,
    request_kind: str,
    message_text: str,
    month: date,
    message_kind: MessageKind = MessageKind.REVEAL,
    person: PersonClaim | None = PersonClaim.PRIVATE_REPLY,
    evidence: dict[str, Any] | None = None,
    note_request: bool = False,
) -> Claim | AccountUnable | None:
    """Claim the private-reply (or DM) leg; `AccountUnable` when the account cannot send now,
    None when another worker has it or it is not claimable. `person` is what the person is
    claimed for (None: no once-per-person claim, for follow prompts and follow-ups);
    `evidence` is merged into `pr_evidence`. `note_request`: the message's request leaves
    right after the claim, so a won claim also writes its request note (as
    `mark_request_sent` would, one round trip sooner)."""
    row = await fetch_one(
        await driver_of(conn),
        _CLAIM_PRIVATE,
        {
            "id": dm_log_id,
            "worker": worker_id,
            "kind": request_kind,
            "text": message_text,
            "month": month,
            "message_kind": message_kind.value,
            "purpose": person.value if person is not None else None,
            "evidence": json.dumps(evidence) if evidence else None,
            "note": note_request,
        },
    )
    if row is None:
        return None
    state, attempt_no, attempt_id, quota_month, account_status, paused_until = row
    if state is None:
        return AccountUnable(account_status, paused_until)
    return Claim(Leg.PRIVATE_REPLY, LegState(state), attempt_no, attempt_id, quota_month)


_CLAIM_PUBLIC = psycopg_sql(
    f"""
WITH leg AS (
    UPDATE dm_logs d SET
        pub_state = 'IN_FLIGHT',
        pub_attempts = d.pub_attempts + 1,
        pub_claimed_at = now(),
        pub_claimed_by = :worker,
        pub_requested_at = NULL,
        pub_next_attempt_at = NULL,
        pub_queued_at = NULL,
        pub_granted_at = NULL,
        pub_text = :text,
        updated_at = now()
    FROM instagram_accounts a
    WHERE d.id = :id AND d.pub_state = 'PENDING' AND d.pub_attempts < {MAX_PUBLIC_ATTEMPTS}
      AND (d.pub_next_attempt_at IS NULL OR d.pub_next_attempt_at <= now() + {DUE_TOLERANCE})
      AND a.id = d.account_id AND {_ACCOUNT_CAN_SEND}
    RETURNING d.pub_attempts
),
attempt AS (
    INSERT INTO delivery_attempts (dm_log_id, leg, attempt_no, request_kind, worker_id)
    SELECT :id, 'public_reply', l.pub_attempts, 'reply', :worker FROM leg l
    RETURNING id
)
SELECT l.pub_attempts AS attempt_no, (SELECT id FROM attempt) AS attempt_id,
       NULL AS account_status, CAST(NULL AS timestamptz) AS paused_until
FROM leg l
UNION ALL {_ACCOUNT_REFUSAL.format(nulls="NULL, NULL")}
"""  # noqa: S608 - composed from module constants; every value is a bound parameter
)


async def claim_public_reply(
    conn: AsyncConnection, *, dm_log_id: int, worker_id: str, reply_text: str
) -> Claim | AccountUnable | None:
    """Claim the public-reply leg; see `claim_private_reply` for what else it may return."""
    params = {"id": dm_log_id, "worker": worker_id, "text": reply_text}
    row = await fetch_one(await driver_of(conn), _CLAIM_PUBLIC, params)
    if row is None:
        return None
    attempt_no, attempt_id, account_status, paused_until = row
    if attempt_no is None:
        return AccountUnable(account_status, paused_until)
    return Claim(Leg.PUBLIC_REPLY, LegState.IN_FLIGHT, attempt_no, attempt_id)


def _mark_sql(leg: Leg) -> str:
    p = "pr" if leg is Leg.PRIVATE_REPLY else "pub"
    return f"""
UPDATE dm_logs SET {p}_requested_at = now()
WHERE id = :id AND {p}_state = 'IN_FLIGHT' AND {p}_claimed_by = :worker
  AND {p}_attempts = :attempt_no
RETURNING id
"""  # noqa: S608 - column names from the Leg enum; every value is a bound parameter


_MARK_REQUEST_SENT = {leg: psycopg_sql(_mark_sql(leg)) for leg in Leg}


async def mark_request_sent(
    conn: AsyncConnection,
    *,
    dm_log_id: int,
    worker_id: str,
    attempt_no: int,
    leg: Leg = Leg.PRIVATE_REPLY,
) -> bool:
    """Note that the leg's request is about to leave; False when the claim is no longer this
    worker's (then nothing may be sent)."""
    params = {"id": dm_log_id, "worker": worker_id, "attempt_no": attempt_no}
    return await fetch_one(await driver_of(conn), _MARK_REQUEST_SENT[leg], params) is not None


_EARLIER_AMBIGUOUS = text(
    """
SELECT EXISTS (
    SELECT 1 FROM delivery_attempts
    WHERE dm_log_id = :id AND leg = 'private_reply' AND classification = 'ambiguous'
      AND id <> :attempt_id) AS ambiguous
"""
)


async def earlier_attempt_ambiguous(
    conn: AsyncConnection, *, dm_log_id: int, attempt_id: int | None
) -> bool:
    """Whether an earlier call of the private leg ended ambiguous: its request may have been
    delivered. Finished attempts never change, so reading them under a held claim is safe."""
    params = {"id": dm_log_id, "attempt_id": attempt_id or 0}
    return bool((await conn.execute(_EARLIER_AMBIGUOUS, params)).scalar())


_EARLIER_CALL_MAY_HAVE_SENT = text(
    """
SELECT EXISTS (
    SELECT 1 FROM delivery_attempts
    WHERE dm_log_id = :id AND leg = 'private_reply' AND request_kind = :kind
      AND classification IN ('sent', 'ambiguous') AND id <> :attempt_id) AS taken
"""
)


async def earlier_call_may_have_sent(
    conn: AsyncConnection, *, dm_log_id: int, request_kind: str, attempt_id: int | None
) -> bool:
    """Whether an earlier call of this kind (a DM's image) was delivered or may have been."""
    params = {"id": dm_log_id, "kind": request_kind, "attempt_id": attempt_id or 0}
    return bool((await conn.execute(_EARLIER_CALL_MAY_HAVE_SENT, params)).scalar())
