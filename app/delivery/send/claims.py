"""The delivery statements: load, claim, record. Each is ONE SQL statement (DESIGN §4).

- `load_delivery`: the log row with its campaign, account and workspace, in one query.
- `claim_private_reply`: locks the row only if its private-reply (or DM) leg is PENDING, due
  and within its attempt budget, and in the same statement claims the person for the campaign
  (INSERT … ON CONFLICT on `campaign_recipients`, for the purpose the message serves: the
  comment's private reply, or the reveal after a tap or a DM; prompts and follow-ups claim no
  person), reserves the monthly quota (conditional upsert), moves the leg to IN_FLIGHT (or
  SKIPPED_DEDUP / SKIPPED_QUOTA) and inserts the `delivery_attempts` row. Of any number of
  racing workers exactly one gets IN_FLIGHT back; only that one may call Meta.
- `claim_public_reply`: the same for the public-reply leg (no person, no quota).
- Both claim only while the account can send (active, or an automatic pause that has run
  out, as `accounts.gate_for` reads it): a 368 or 190 that another job met after this one
  loaded the row stops it here. Such a refusal comes back from the same statement as
  `AccountUnable`, so the caller can keep the work waiting without another query.
- `record`: the leg's outcome plus the attempt row's, plus giving back the quota and the person
  claim on a definite failure — and, for a SENT reveal that answered a tap or a DM, inserting
  its follow-up row — in one statement, conditional on still holding the claim.
- `settle_if_revealed`, `record_follow_check`: the DM flow's two extra steps, one statement each
  (the first only when the load saw an earlier reveal, the second only for a re-check).

They run on autocommit connections (`autocommit`): every statement is its own transaction,
so a delivery costs one round trip per statement and no BEGIN/COMMIT.

A person claim is held by a log row while that row may still deliver or has delivered
(PENDING, IN_FLIGHT, SENT, UNCONFIRMED). A row that ended without delivering gives it up:
`record` deletes it, and should that ever be skipped (a crash), a later claim may take over a
claim whose holder is in such a dead state, so no fan is locked out by a failure.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.db.models import AttemptClass, Leg, LegState, MessageKind, PersonClaim
from app.delivery.content.compose import CampaignTexts
from app.delivery.content.follow_ups import FollowUpPlan, follow_up_cte, follow_up_params
from app.delivery.send.quota import RESERVE_UPSERT

MAX_PUBLIC_ATTEMPTS = 3
# A job scheduled for a due time may start a moment early (SAQ schedules in whole seconds).
_DUE_TOLERANCE = "interval '1 second'"
_DEAD_STATES = tuple(
    state.value
    for state in LegState
    if state not in (LegState.PENDING, LegState.IN_FLIGHT, LegState.SENT, LegState.UNCONFIRMED)
)
_DEAD_LIST = ", ".join(f"'{state}'" for state in _DEAD_STATES)
# The account `a` can send, as `accounts.gate_for` says (SEND), NULL-safe so that NOT works.
_ACCOUNT_CAN_SEND = """COALESCE(a.status = 'active' OR (a.status = 'paused'
    AND a.paused_until IS NOT NULL AND a.paused_until <= now()), false)"""
# The second part of a claim's answer: the account's state when it refused the claim.
_ACCOUNT_REFUSAL = f"""
SELECT {{nulls}}, a.status, a.paused_until
FROM dm_logs d JOIN instagram_accounts a ON a.id = d.account_id
WHERE d.id = :id AND NOT {_ACCOUNT_CAN_SEND}"""  # noqa: S608 - module constants only


@asynccontextmanager
async def autocommit(engine: AsyncEngine) -> AsyncIterator[AsyncConnection]:
    """A pooled connection on which every statement commits by itself."""
    async with engine.connect() as conn:
        await conn.execution_options(isolation_level="AUTOCOMMIT")
        yield conn


# --- load --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Delivery:
    """A log row with what sending it needs from its campaign, account and workspace."""

    id: int
    workspace_id: int
    account_id: int
    campaign_id: int | None
    trigger_kind: str
    trigger_id: str
    recipient_id: str | None
    recipient_username: str | None
    deadline_at: datetime | None
    pr_state: LegState
    pr_attempts: int
    pr_attempt_limit: int
    pr_next_attempt_at: datetime | None
    pr_evidence: dict[str, Any] | None
    pub_state: LegState | None
    pub_attempts: int
    pub_next_attempt_at: datetime | None
    ig_user_id: str
    account_status: str
    paused_until: datetime | None
    token_ciphertext: bytes | None
    token_key_id: str | None
    campaign_status: str | None
    dm_text: str
    buttons: list[dict[str, Any]]
    public_replies: list[str]
    once_per_person: bool
    # The DM flow's part: what the row is about and the campaign's two-step settings.
    trigger_payload: str | None = None
    source_log_id: int | None = None
    message_text: str | None = None
    message_kind: MessageKind | None = None
    opening_dm_enabled: bool = False
    opening_dm_text: str | None = None
    opening_dm_button_title: str | None = None
    follow_gate_enabled: bool = False
    follow_prompt_text: str | None = None
    follow_prompt_button_title: str | None = None
    follow_up_enabled: bool = False
    follow_up_text: str | None = None
    follow_up_delay_minutes: int = 0
    # A PENDING tap or DM whose person another row already gave (or is giving) the link, as
    # seen at load: `settle_if_revealed` then settles it (and checks again as it does).
    revealed_elsewhere: bool = False

    def texts(self) -> CampaignTexts:
        """The campaign settings its messages are made of (`app.delivery.content.compose`)."""
        return CampaignTexts(
            campaign_id=self.campaign_id or 0,
            dm_text=self.dm_text,
            buttons=self.buttons,
            opening_dm_text=self.opening_dm_text,
            opening_dm_button_title=self.opening_dm_button_title,
            follow_gate=self.follow_gate_enabled,
            follow_prompt_text=self.follow_prompt_text,
            follow_prompt_button_title=self.follow_prompt_button_title,
        )


# Another row of this campaign already gave the person the link, or is giving it (the `d` row
# being a tap or a DM of a once-per-person campaign).
_REVEALED_ELSEWHERE = f"""EXISTS (
    SELECT 1 FROM campaign_recipients cr JOIN dm_logs h ON h.id = cr.dm_log_id
    WHERE cr.campaign_id = d.campaign_id AND cr.recipient_id = d.recipient_id
      AND cr.purpose = '{PersonClaim.REVEAL.value}' AND h.id <> d.id
      AND h.pr_state IN ('SENT', 'UNCONFIRMED', 'IN_FLIGHT'))"""  # noqa: S608 - constants

_LOAD = text(
    f"""
SELECT d.id, d.workspace_id, d.account_id, d.campaign_id, d.trigger_kind, d.trigger_id,
       d.recipient_id, d.recipient_username, d.deadline_at,
       d.pr_state, d.pr_attempts, d.pr_attempt_limit, d.pr_next_attempt_at, d.pr_evidence,
       d.pub_state, d.pub_attempts, d.pub_next_attempt_at,
       a.ig_user_id, a.status, a.paused_until, a.token_ciphertext, a.token_key_id,
       c.status, COALESCE(c.dm_text, ''), COALESCE(c.buttons, '[]'::jsonb),
       COALESCE(c.public_replies, '{{}}'), COALESCE(c.once_per_person, true),
       d.trigger_payload, d.source_log_id, d.message_text, d.message_kind,
       COALESCE(c.opening_dm_enabled, false), c.opening_dm_text, c.opening_dm_button_title,
       COALESCE(c.follow_gate_enabled, false), c.follow_prompt_text,
       c.follow_prompt_button_title,
       COALESCE(c.follow_up_enabled, false), c.follow_up_text,
       COALESCE(c.follow_up_delay_minutes, 0),
       CASE WHEN d.trigger_kind IN ('postback', 'message') AND d.pr_state = 'PENDING'
                 AND c.once_per_person
            THEN {_REVEALED_ELSEWHERE} ELSE false END
FROM dm_logs d
JOIN instagram_accounts a ON a.id = d.account_id
LEFT JOIN campaigns c ON c.id = d.campaign_id
WHERE d.id = :id
"""  # noqa: S608 - composed from module constants; the only value is a bound parameter
)


async def load_delivery(conn: AsyncConnection, dm_log_id: int) -> Delivery | None:
    row = (await conn.execute(_LOAD, {"id": dm_log_id})).first()
    if row is None:
        return None
    (
        id_, ws, account, campaign, kind, trigger, recipient, username, deadline,
        pr_state, pr_attempts, pr_limit, pr_next, pr_evidence,
        pub_state, pub_attempts, pub_next,
        ig_user_id, account_status, paused_until, ciphertext, key_id,
        campaign_status, dm_text, buttons, public_replies, once,
        payload, source, message_text, message_kind,
        opening, opening_text, opening_title,
        gate, prompt_text, prompt_title,
        follow_up, follow_up_text, follow_up_delay, revealed,
    ) = row  # fmt: skip
    return Delivery(
        id=id_,
        workspace_id=ws,
        account_id=account,
        campaign_id=campaign,
        trigger_kind=kind,
        trigger_id=trigger,
        recipient_id=recipient,
        recipient_username=username,
        deadline_at=deadline,
        pr_state=LegState(pr_state),
        pr_attempts=pr_attempts,
        pr_attempt_limit=pr_limit,
        pr_next_attempt_at=pr_next,
        pr_evidence=pr_evidence,
        pub_state=LegState(pub_state) if pub_state else None,
        pub_attempts=pub_attempts,
        pub_next_attempt_at=pub_next,
        ig_user_id=ig_user_id,
        account_status=account_status,
        paused_until=paused_until,
        token_ciphertext=bytes(ciphertext) if ciphertext is not None else None,
        token_key_id=key_id,
        campaign_status=campaign_status,
        dm_text=dm_text,
        buttons=list(buttons or []),
        public_replies=list(public_replies or []),
        once_per_person=bool(once),
        trigger_payload=payload,
        source_log_id=source,
        message_text=message_text,
        message_kind=MessageKind(message_kind) if message_kind else None,
        opening_dm_enabled=bool(opening),
        opening_dm_text=opening_text,
        opening_dm_button_title=opening_title,
        follow_gate_enabled=bool(gate),
        follow_prompt_text=prompt_text,
        follow_prompt_button_title=prompt_title,
        follow_up_enabled=bool(follow_up),
        follow_up_text=follow_up_text,
        follow_up_delay_minutes=int(follow_up_delay),
        revealed_elsewhere=bool(revealed),
    )


# --- claims ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Claim:
    """The outcome of a claim statement for the worker that ran it."""

    leg: Leg
    state: LegState  # IN_FLIGHT: ours to send; SKIPPED_*: settled by the claim itself
    attempt_no: int
    attempt_id: int | None
    quota_month: date | None = None

    @property
    def won(self) -> bool:
        return self.state is LegState.IN_FLIGHT


@dataclass(frozen=True, slots=True)
class AccountUnable:
    """A claim refused because the account cannot send now; the row was left as it was."""

    status: str
    paused_until: datetime | None


_CLAIM_PRIVATE = text(
    f"""
WITH target AS (
    SELECT d.id, d.workspace_id, d.campaign_id, d.recipient_id,
           (CAST(:purpose AS varchar) IS NOT NULL
            AND d.campaign_id IS NOT NULL AND d.recipient_id IS NOT NULL
            AND COALESCE(c.once_per_person, true)) AS once
    FROM dm_logs d JOIN instagram_accounts a ON a.id = d.account_id
    LEFT JOIN campaigns c ON c.id = d.campaign_id
    WHERE d.id = :id AND d.pr_state = 'PENDING' AND d.pr_attempts < d.pr_attempt_limit
      AND (d.pr_next_attempt_at IS NULL OR d.pr_next_attempt_at <= now() + {_DUE_TOLERANCE})
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
                      AND h.pr_state NOT IN ({_DEAD_LIST}))
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
            "WHERE p.ok AND COALESCE(w.monthly_dm_quota, 1) >= 1"
        )
    }
),
verdict AS (
    SELECT p.id,
           CASE WHEN NOT p.ok THEN 'SKIPPED_DEDUP'
                WHEN NOT EXISTS (SELECT 1 FROM quota) THEN 'SKIPPED_QUOTA'
                ELSE 'IN_FLIGHT' END AS state
    FROM person_ok p
),
leg AS (
    UPDATE dm_logs d SET
        pr_state = v.state,
        pr_attempts = d.pr_attempts + CASE WHEN v.state = 'IN_FLIGHT' THEN 1 ELSE 0 END,
        pr_claimed_at = now(),
        pr_claimed_by = :worker,
        pr_next_attempt_at = NULL,
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
SELECT l.pr_state, l.pr_attempts, (SELECT id FROM attempt), (SELECT month FROM quota),
       NULL, CAST(NULL AS timestamptz)
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
) -> Claim | AccountUnable | None:
    """Claim the private-reply (or DM) leg; `AccountUnable` when the account cannot send now,
    None when another worker has it or it is not claimable. `person` is what the person is
    claimed for (None: no once-per-person claim, for follow prompts and follow-ups);
    `evidence` is merged into `pr_evidence`."""
    row = (
        await conn.execute(
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
            },
        )
    ).first()
    if row is None:
        return None
    if row[0] is None:
        return AccountUnable(row[4], row[5])
    return Claim(Leg.PRIVATE_REPLY, LegState(row[0]), row[1], row[2], row[3])


_CLAIM_PUBLIC = text(
    f"""
WITH leg AS (
    UPDATE dm_logs d SET
        pub_state = 'IN_FLIGHT',
        pub_attempts = d.pub_attempts + 1,
        pub_claimed_at = now(),
        pub_claimed_by = :worker,
        pub_next_attempt_at = NULL,
        pub_text = :text,
        updated_at = now()
    FROM instagram_accounts a
    WHERE d.id = :id AND d.pub_state = 'PENDING' AND d.pub_attempts < {MAX_PUBLIC_ATTEMPTS}
      AND (d.pub_next_attempt_at IS NULL OR d.pub_next_attempt_at <= now() + {_DUE_TOLERANCE})
      AND a.id = d.account_id AND {_ACCOUNT_CAN_SEND}
    RETURNING d.pub_attempts
),
attempt AS (
    INSERT INTO delivery_attempts (dm_log_id, leg, attempt_no, request_kind, worker_id)
    SELECT :id, 'public_reply', l.pub_attempts, 'reply', :worker FROM leg l
    RETURNING id
)
SELECT l.pub_attempts, (SELECT id FROM attempt), NULL, CAST(NULL AS timestamptz) FROM leg l
UNION ALL {_ACCOUNT_REFUSAL.format(nulls="NULL, NULL")}
"""  # noqa: S608 - composed from module constants; every value is a bound parameter
)


async def claim_public_reply(
    conn: AsyncConnection, *, dm_log_id: int, worker_id: str, reply_text: str
) -> Claim | AccountUnable | None:
    """Claim the public-reply leg; see `claim_private_reply` for what else it may return."""
    row = (
        await conn.execute(
            _CLAIM_PUBLIC, {"id": dm_log_id, "worker": worker_id, "text": reply_text}
        )
    ).first()
    if row is None:
        return None
    if row[0] is None:
        return AccountUnable(row[2], row[3])
    return Claim(Leg.PUBLIC_REPLY, LegState.IN_FLIGHT, row[0], row[1])


# --- recording ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CallReport:
    """What one call to Meta returned, for its `delivery_attempts` row."""

    classification: AttemptClass
    latency_ms: int
    http_status: int | None = None
    code: int | None = None
    subcode: int | None = None
    fbtrace_id: str | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class LegUpdate:
    """Where a claimed leg goes after its call(s)."""

    state: LegState
    message_id: str | None = None  # Meta's message id, or the public reply's comment id
    next_attempt_at: datetime | None = None
    # Give the attempt back to the budget (account-level waits: 368, 190).
    refund_attempt: bool = False
    error_code: int | None = None
    error_subcode: int | None = None
    error_message: str | None = None
    evidence: dict[str, Any] | None = None
    # Private replies only: give the quota back (the month it was taken) / free the person.
    release_quota_month: date | None = None
    release_person: bool = False
    # DMs only: the follow-up a SENT reveal schedules (inserted by the same statement).
    follow_up: FollowUpPlan | None = None


@dataclass(frozen=True, slots=True)
class Recorded:
    """What `record` did; true when the outcome was written (the claim was still ours)."""

    written: bool
    follow_up_id: int | None = None
    follow_up_due: datetime | None = None

    def __bool__(self) -> bool:
        return self.written


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
    follow_up_id = (
        "(SELECT id FROM follow_up), (SELECT pr_next_attempt_at FROM follow_up)"
        if private
        else "NULL, NULL"
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
){follow_up}
SELECT (SELECT count(*) FROM leg), (SELECT count(*) FROM attempt), {follow_up_id}
"""  # noqa: S608 - column names from the Leg enum; every value is a bound parameter


_RECORD = {leg: text(_record_sql(leg)) for leg in Leg}


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
        params["evidence"] = json.dumps(update.evidence) if update.evidence else None
        sent = update.state is LegState.SENT
        params |= follow_up_params(update.follow_up if sent else None)
    row = (await conn.execute(_RECORD[claim.leg], params)).first()
    if row is None or not row[0]:
        return Recorded(False)
    return Recorded(True, row[2], row[3])


_NEXT_CALL = text(
    """
WITH done AS (
    UPDATE delivery_attempts SET
        finished_at = now(), latency_ms = :latency_ms, http_status = :http_status,
        meta_code = :code, meta_subcode = :subcode, fbtrace_id = :fbtrace_id,
        error_message = :call_error, classification = :classification
    WHERE id = :attempt_id
    RETURNING dm_log_id, leg, attempt_no
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
    return Claim(claim.leg, claim.state, claim.attempt_no, row[0] if row else None)


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
WHERE l.pr_state IN ({_DEAD_LIST}) AND cr.campaign_id = l.campaign_id
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
    updated_at = now()
WHERE id = :id AND ((:pr AND pr_state = 'PENDING') OR (:pub AND pub_state = 'PENDING'))
"""
)


async def postpone(
    conn: AsyncConnection,
    dm_log_id: int,
    until: datetime,
    reason: str,
    *,
    private: bool = True,
    public: bool = True,
) -> None:
    """Keep PENDING legs waiting until `until` (a full budget, a paused account…)."""
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
  AND {_REVEALED_ELSEWHERE}
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
  AND (pr_next_attempt_at IS NULL OR pr_next_attempt_at <= now() + {_DUE_TOLERANCE})
RETURNING id
"""  # noqa: S608 - composed from module constants; every value is a bound parameter
)


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
