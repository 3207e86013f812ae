"""Writing what became of a leg: each ONE SQL statement, on an autocommit connection.

- `record`: the leg's outcome plus the attempt row's, plus giving back the quota and the
  person claim on a definite failure — and, for a SENT reveal that answered a tap or a DM,
  inserting its follow-up row; for a private reply refused for the account's pace, leaving it
  to the account's pacer (grant cleared, backlog marked) — in one statement, conditional on
  still holding the claim (a claim the stale-claim sweep took over is not overwritten).
- `start_next_call`: closes a call's attempt row and opens the next under the same claim (the
  plain-text fallback after a rejected template); the first call was refused, so the leg's
  request note is cleared until the next request leaves.
- `settle_pending`: moves still-PENDING legs to a final skip state and frees a person claim
  the row no longer needs; `postpone`: keeps PENDING legs waiting until a given time.
- `settle_if_revealed`, `record_follow_check`: the DM flow's two extra steps (the first only
  when the load saw an earlier reveal, the second only for a re-check).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from app.db.models import Leg, LegState, MessageKind
from app.db.raw import driver_of, fetch_one, psycopg_sql
from app.delivery.content.follow_ups import follow_up_cte, follow_up_params
from app.delivery.send.claims import DEAD_LIST, DUE_TOLERANCE, REVEALED_ELSEWHERE
from app.delivery.send.legs import CallReport, Claim, LegUpdate, Recorded

# --- a claimed leg's outcome ------------------------------------------------------------


def _record_sql(leg: Leg) -> str:
    p = "pr" if leg is Leg.PRIVATE_REPLY else "pub"
    message_column = "pr_message_id" if leg is Leg.PRIVATE_REPLY else "pub_reply_id"
    private = leg is Leg.PRIVATE_REPLY
    evidence = (
        "pr_evidence = CASE WHEN CAST(:evidence AS jsonb) IS NULL THEN pr_evidence "
        "ELSE COALESCE(pr_evidence, '{}'::jsonb) || CAST(:evidence AS jsonb) END,"
        if private
        else ""
    )
    follow_up = f",\n{follow_up_cte('leg')}" if private else ""
    # A private reply refused for the account's pace waits for its pacer again.
    to_pacer = (
        "pr_granted_at = CASE WHEN :to_pacer THEN NULL ELSE pr_granted_at END," if private else ""
    )
    backlog = (
        """,
backlog AS (
    UPDATE instagram_accounts a SET pr_backlog_since = now()
    FROM leg l WHERE :to_pacer AND a.id = l.account_id AND a.pr_backlog_since IS NULL
    RETURNING a.id
)"""
        if private
        else ""
    )
    follow_up_columns = (
        "(SELECT id FROM follow_up) AS follow_up_id,"
        " (SELECT pr_next_attempt_at FROM follow_up) AS follow_up_due"
        if private
        else "NULL AS follow_up_id, NULL AS follow_up_due"
    )
    return f"""
WITH leg AS (
    UPDATE dm_logs SET
        {p}_state = :state,
        {p}_attempts = {p}_attempts - CASE WHEN :refund THEN 1 ELSE 0 END,
        {p}_next_attempt_at = :next_at,
        {p}_sent_at = CASE WHEN :sent THEN now() ELSE {p}_sent_at END,
        {message_column} = COALESCE(:message_id, {message_column}),
        {p}_error_code = :error_code,
        {p}_error_subcode = :error_subcode,
        {p}_error_message = :error_message,
        {evidence}
        {to_pacer}
        updated_at = now()
    WHERE id = :id AND {p}_claimed_by = :worker AND {p}_attempts = :attempt_no
      AND ({p}_state = 'IN_FLIGHT' OR ({p}_state = 'UNCONFIRMED' AND :sent))
    RETURNING id, workspace_id, account_id, campaign_id, campaign_version, recipient_id,
              recipient_username
),
attempt AS (
    UPDATE delivery_attempts SET
        finished_at = now(), latency_ms = :latency_ms, http_status = :http_status,
        meta_code = :code, meta_subcode = :subcode, fbtrace_id = :fbtrace_id,
        error_message = :call_error, classification = :classification
    WHERE id = :attempt_id
    RETURNING id
),
quota AS (
    UPDATE usage_counters u SET dms_reserved = u.dms_reserved - 1
    FROM leg l
    WHERE CAST(:quota_month AS date) IS NOT NULL AND u.workspace_id = l.workspace_id
      AND u.month = CAST(:quota_month AS date) AND u.dms_reserved > 0
    RETURNING u.month
),
person AS (
    DELETE FROM campaign_recipients cr USING leg l
    WHERE :release_person AND cr.campaign_id = l.campaign_id
      AND cr.recipient_id = l.recipient_id AND cr.dm_log_id = l.id
    RETURNING cr.dm_log_id
){backlog}{follow_up}
SELECT (SELECT count(*) FROM leg) AS legs, (SELECT count(*) FROM attempt) AS attempts,
       {follow_up_columns}
"""  # noqa: S608 - column names from the Leg enum; every value is a bound parameter


# Run once or more for every delivery: through the driver, like the claims (`claims`).
_RECORD = {leg: psycopg_sql(_record_sql(leg)) for leg in Leg}


async def record(
    conn: AsyncConnection,
    claim: Claim,
    *,
    dm_log_id: int,
    worker_id: str,
    call: CallReport,
    update: LegUpdate,
) -> Recorded:
    """Write a claimed leg's outcome; false if the claim was no longer ours (swept)."""
    params = {
        "id": dm_log_id,
        "worker": worker_id,
        "attempt_no": claim.attempt_no,
        "attempt_id": claim.attempt_id,
        "state": update.state.value,
        "refund": update.refund_attempt,
        "next_at": update.next_attempt_at,
        "sent": update.state is LegState.SENT,
        "message_id": update.message_id,
        "error_code": update.error_code,
        "error_subcode": update.error_subcode,
        "error_message": update.error_message,
        "latency_ms": call.latency_ms,
        "http_status": call.http_status,
        "code": call.code,
        "subcode": call.subcode,
        "fbtrace_id": call.fbtrace_id,
        "call_error": call.error,
        "classification": call.classification.value,
        "quota_month": update.release_quota_month,
        "release_person": update.release_person,
    }
    if claim.leg is Leg.PRIVATE_REPLY:
        params["to_pacer"] = update.to_pacer
        params["evidence"] = json.dumps(update.evidence) if update.evidence else None
        sent = update.state is LegState.SENT
        params |= follow_up_params(update.follow_up if sent else None)
    row = await fetch_one(await driver_of(conn), _RECORD[claim.leg], params)
    if row is None:
        return Recorded(False)
    legs, _attempts, follow_up_id, follow_up_due = row
    if not legs:
        return Recorded(False)
    return Recorded(True, follow_up_id, follow_up_due)


_NEXT_CALL = text(
    """
WITH done AS (
    UPDATE delivery_attempts SET
        finished_at = now(), latency_ms = :latency_ms, http_status = :http_status,
        meta_code = :code, meta_subcode = :subcode, fbtrace_id = :fbtrace_id,
        error_message = :call_error, classification = :classification
    WHERE id = :attempt_id
    RETURNING dm_log_id, leg, attempt_no
),
unmarked AS (
    UPDATE dm_logs d SET pr_requested_at = NULL
    FROM done WHERE d.id = done.dm_log_id AND d.pr_state = 'IN_FLIGHT'
      AND d.pr_claimed_by = :worker
    RETURNING d.id
)
INSERT INTO delivery_attempts (dm_log_id, leg, attempt_no, request_kind, worker_id)
SELECT dm_log_id, leg, attempt_no, :kind, :worker FROM done
RETURNING id
"""
)


async def start_next_call(
    conn: AsyncConnection, claim: Claim, *, call: CallReport, request_kind: str, worker_id: str
) -> Claim:
    """Close the attempt row of a call and open one for a second call under the same claim
    (the plain-text fallback after a rejected template)."""
    row = (
        await conn.execute(
            _NEXT_CALL,
            {
                "attempt_id": claim.attempt_id,
                "latency_ms": call.latency_ms,
                "http_status": call.http_status,
                "code": call.code,
                "subcode": call.subcode,
                "fbtrace_id": call.fbtrace_id,
                "call_error": call.error,
                "classification": call.classification.value,
                "kind": request_kind,
                "worker": worker_id,
            },
        )
    ).first()
    return Claim(claim.leg, claim.state, claim.attempt_no, row.id if row else None)


_RELABEL_CALL = text(
    """
UPDATE delivery_attempts SET request_kind = :kind
WHERE id = :attempt_id AND finished_at IS NULL
"""
)


async def relabel_call(conn: AsyncConnection, claim: Claim, *, request_kind: str) -> Claim:
    """Name the claim's open attempt row for the call it will make after all (a DM's image
    skipped: the message goes under the row the claim opened for the image)."""
    await conn.execute(_RELABEL_CALL, {"attempt_id": claim.attempt_id, "kind": request_kind})
    return claim


# --- settling legs that will not be sent --------------------------------------------------

_SETTLE = text(
    f"""
WITH leg AS (
    UPDATE dm_logs SET
        pr_state = CASE WHEN :pr AND pr_state = 'PENDING' THEN :state ELSE pr_state END,
        pr_error_message = CASE WHEN :pr AND pr_state = 'PENDING' THEN :reason
                           ELSE pr_error_message END,
        pub_state = CASE WHEN :pub AND pub_state = 'PENDING' THEN :state ELSE pub_state END,
        pub_error_message = CASE WHEN :pub AND pub_state = 'PENDING' THEN :reason
                            ELSE pub_error_message END,
        updated_at = now()
    WHERE id = :id AND ((:pr AND pr_state = 'PENDING') OR (:pub AND pub_state = 'PENDING'))
    RETURNING id, campaign_id, recipient_id, pr_state
)
DELETE FROM campaign_recipients cr USING leg l
WHERE l.pr_state IN ({DEAD_LIST}) AND cr.campaign_id = l.campaign_id
  AND cr.recipient_id = l.recipient_id AND cr.dm_log_id = l.id
"""  # noqa: S608 - composed from module constants; every value is a bound parameter
)


async def settle_pending(
    conn: AsyncConnection,
    dm_log_id: int,
    state: LegState,
    reason: str,
    *,
    private: bool = True,
    public: bool = True,
) -> None:
    """Move still-PENDING legs to a final skip state (campaign inactive, window passed…)."""
    await conn.execute(
        _SETTLE,
        {"id": dm_log_id, "state": state.value, "reason": reason, "pr": private, "pub": public},
    )


_POSTPONE = text(
    """
UPDATE dm_logs SET
    pr_next_attempt_at = CASE WHEN :pr AND pr_state = 'PENDING' THEN :until
                         ELSE pr_next_attempt_at END,
    pr_error_message = CASE WHEN :pr AND pr_state = 'PENDING' THEN :reason
                       ELSE pr_error_message END,
    pub_next_attempt_at = CASE WHEN :pub AND pub_state = 'PENDING' THEN :until
                          ELSE pub_next_attempt_at END,
    pub_error_message = CASE WHEN :pub AND pub_state = 'PENDING' THEN :reason
                        ELSE pub_error_message END,
    updated_at = now()
WHERE id = :id AND ((:pr AND pr_state = 'PENDING') OR (:pub AND pub_state = 'PENDING'))
"""
)


# The public reply of a DM not sent (yet): it waits, not due before the reply window closes
# (where the window sweep settles it), unless the DM's SENT makes it due sooner.
_HOLD_PUBLIC = text(
    """
UPDATE dm_logs SET
    pub_next_attempt_at = COALESCE(deadline_at, now() + interval '7 days'),
    pub_error_message = :reason, updated_at = now()
WHERE id = :id AND pub_state = 'PENDING'
"""
)
WAITING_FOR_DM = "waits for the DM: it is posted once the DM is sent"


async def hold_public(conn: AsyncConnection, dm_log_id: int) -> None:
    """Keep the public reply PENDING until its DM is SENT (`WAITING_FOR_DM`)."""
    await conn.execute(_HOLD_PUBLIC, {"id": dm_log_id, "reason": WAITING_FOR_DM})


_PUBLIC_NOW = text(
    """
UPDATE dm_logs SET pub_next_attempt_at = now(), pub_error_message = NULL, updated_at = now()
WHERE id = :id AND pub_state = 'PENDING' AND pr_state = 'SENT'
"""
)


async def release_public(conn: AsyncConnection, dm_log_id: int) -> None:
    """The DM is SENT: the public reply that waited for it is due now."""
    await conn.execute(_PUBLIC_NOW, {"id": dm_log_id})


async def postpone(
    conn: AsyncConnection,
    dm_log_id: int,
    until: datetime,
    reason: str,
    *,
    private: bool = True,
    public: bool = True,
) -> None:
    """Keep PENDING legs waiting until `until` (a paused account, Redis away…), each saying
    why in `reason`, in the creator's words."""
    await conn.execute(
        _POSTPONE,
        {"id": dm_log_id, "until": until, "reason": reason, "pr": private, "pub": public},
    )


# --- the DM flow's own steps --------------------------------------------------------------

_SETTLE_IF_REVEALED = text(
    f"""
UPDATE dm_logs d SET
    pr_state = 'SKIPPED_DEDUP',
    message_kind = '{MessageKind.REVEAL.value}',
    pr_error_message = 'this person already got this campaign''s link',
    updated_at = now()
FROM campaigns c
WHERE d.id = :id AND d.pr_state = 'PENDING' AND c.id = d.campaign_id AND c.once_per_person
  AND {REVEALED_ELSEWHERE}
RETURNING d.id
"""  # noqa: S608 - composed from module constants; every value is a bound parameter
)


async def settle_if_revealed(conn: AsyncConnection, dm_log_id: int) -> bool:
    """SKIPPED_DEDUP for a tap or DM whose person already has (or is getting) this campaign's
    link: no follow check, no prompt for someone who has the link. The claim would refuse the
    reveal anyway; this only spares the person a pointless prompt. Run only when the load saw
    it (`Delivery.revealed_elsewhere`), so the common case costs no statement."""
    row = (await conn.execute(_SETTLE_IF_REVEALED, {"id": dm_log_id})).first()
    return row is not None


_RECORD_FOLLOW_CHECK = text(
    f"""
UPDATE dm_logs SET
    pr_next_attempt_at = :next_at,
    pr_error_message = :reason,
    pr_evidence = COALESCE(pr_evidence, '{{}}'::jsonb) || jsonb_build_object(
        'follow_checks',
        COALESCE(pr_evidence -> 'follow_checks', '[]'::jsonb) || CAST(:check AS jsonb)),
    updated_at = now()
WHERE id = :id AND pr_state = 'PENDING'
  AND jsonb_array_length(COALESCE(pr_evidence -> 'follow_checks', '[]'::jsonb)) = :seen
  AND (pr_next_attempt_at IS NULL OR pr_next_attempt_at <= now() + {DUE_TOLERANCE})
RETURNING id
"""  # noqa: S608 - composed from module constants; every value is a bound parameter
)


_CHECKING_NOTE = text(
    """
INSERT INTO dm_logs (workspace_id, account_id, campaign_id, campaign_version, trigger_kind,
    trigger_id, source_log_id, recipient_id, recipient_username, trigger_text, deadline_at,
    message_text, message_kind, trigger_payload, pr_next_attempt_at)
SELECT workspace_id, account_id, campaign_id, campaign_version, 'follow_up',
    'checking:' || id, id, recipient_id, recipient_username, :text, deadline_at,
    :text, 'follow_up', :payload, now()
FROM dm_logs WHERE id = :id
ON CONFLICT (account_id, trigger_id) DO NOTHING
RETURNING id
"""
)


async def add_checking_note(
    conn: AsyncConnection, dm_log_id: int, *, text_: str, payload: str
) -> int | None:
    """The "checking…" DM of a tap row, as a row of its own (once per tap); its id if new."""
    row = (
        await conn.execute(_CHECKING_NOTE, {"id": dm_log_id, "text": text_, "payload": payload})
    ).first()
    return int(row.id) if row is not None else None


async def record_follow_check(
    conn: AsyncConnection,
    dm_log_id: int,
    *,
    seen: int,
    check: dict[str, Any],
    next_at: datetime,
    reason: str,
) -> bool:
    """Note a "not following yet" and keep the row PENDING until `next_at`; False when another
    worker already recorded this check (`seen` is how many this one saw)."""
    row = (
        await conn.execute(
            _RECORD_FOLLOW_CHECK,
            {
                "id": dm_log_id,
                "seen": seen,
                "check": json.dumps([check]),
                "next_at": next_at,
                "reason": reason,
            },
        )
    ).first()
    return row is not None
