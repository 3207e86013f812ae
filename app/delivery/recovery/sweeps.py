"""The two safety nets that run as crons: the stale-claim sweep and the due-work relay.

- Stale-claim sweep: a leg IN_FLIGHT for longer than a send can take (two calls, the
  template and its text fallback, each up to the send timeout, plus a margin) belongs to a
  worker that died or lost its database. A private leg whose holder never noted its request
  as leaving (`pr_requested_at` NULL, see `app.delivery.send.claims.mark_request_sent`) sent
  nothing: it goes back to PENDING, due now, its job enqueued, the quota reservation given
  back and the attempt not counted against its budget. A public leg without its note
  (`pub_requested_at`) goes back to PENDING too, its attempt counted (FAILED once its three
  are used). Any other may have been delivered, so it becomes UNCONFIRMED, never PENDING,
  and a private one gets an inbox check. A claim whose holder still beats (`app.heartbeat`)
  is left to it until its job's timeout has passed (SAQ ends the job by then): on a loaded
  machine a live send can outlast the thresholds above, and sweeping it early only turns a
  delivered DM UNCONFIRMED (its record is refused) or drops a leg about to be sent.
- Due-work relay: PENDING legs whose time has come but that no job is handling (a lost
  enqueue, Redis down, a worker killed with jobs in hand, an account back from a pause) are
  enqueued again under the key a waiting job would have, so nothing piles up; comments waiting
  for the budget of an account with a backlog are left to its pacer, which the relay kicks
  (`app.delivery.send.pacer`). Before that it
  lifts automatic pauses that have run out and settles work whose window has closed (7 days
  for a comment's private reply, 24 hours for a DM). After it, it queues the inbox check
  again for an UNCONFIRMED private leg whose check has not concluded and that nothing touched
  for the grace period (its job lost with Redis, or a throttled check's next try).

Both cover every kind of row: comments, taps, DM keyword triggers and follow-ups (a follow-up
waiting for its time, a tap waiting for its next follow check, are PENDING with a due time
like a retry); the relay enqueues each row's own job.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from dataclasses import dataclass, field

from saq import Queue
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from app.delivery.send.account_state import resume_expired_pauses
from app.delivery.send.legs import MAX_PUBLIC_ATTEMPTS
from app.delivery.send.scheduling import enqueue_delivery, enqueue_verification, kick_pacer
from app.instruments import DELIVERIES

logger = logging.getLogger("oncereply.delivery")

STALE_MARGIN_S = 10.0
# A due leg still PENDING this long after its time is presumed to have lost its job.
RELAY_GRACE_S = 60.0
RELAY_BATCH = 1000


# A private claim with no request note this long after it was made was abandoned: the note
# follows the claim within moments, and sweeping a slow live holder early only makes it drop
# the leg (its note is refused), never send twice.
UNSENT_AFTER_S = 10.0


def stale_after_s(send_timeout_s: float) -> float:
    return 2 * send_timeout_s + STALE_MARGIN_S


def unsent_after_s(send_timeout_s: float) -> float:
    """When a private claim without its request note is given back: soon, so a dead worker's
    DM goes out again within seconds, but never later than a claim with one is swept."""
    return min(UNSENT_AFTER_S, stale_after_s(send_timeout_s))


# A leg's claim is stale past its threshold, unless its holder still beats and its job may
# still be running (younger than the job's timeout).
_PR_STALE = """(pr_state = 'IN_FLIGHT' AND pr_claimed_at < now() - make_interval(
        secs => CASE WHEN pr_requested_at IS NULL THEN :unsent_older ELSE :older END)
    AND NOT (pr_claimed_by = ANY(CAST(:alive AS text[]))
             AND pr_claimed_at > now() - make_interval(secs => :held)))"""
_PUB_STALE = """(pub_state = 'IN_FLIGHT' AND pub_claimed_at < now() - make_interval(secs => :older)
    AND NOT (pub_claimed_by = ANY(CAST(:alive AS text[]))
             AND pub_claimed_at > now() - make_interval(secs => :held)))"""

_SWEEP = text(
    f"""
WITH stale AS (
    SELECT id, workspace_id, trigger_kind, pr_claimed_at,
           {_PR_STALE} AS pr,
           pr_requested_at IS NULL AS pr_unsent,
           {_PUB_STALE} AS pub,
           pub_requested_at IS NULL AS pub_unsent,
           pub_attempts < {MAX_PUBLIC_ATTEMPTS} AS pub_budget_left
    FROM dm_logs
    WHERE {_PR_STALE} OR {_PUB_STALE}
    FOR UPDATE SKIP LOCKED
),
legs AS (
    UPDATE dm_logs d SET
        pr_state = CASE WHEN s.pr AND s.pr_unsent THEN 'PENDING'
                        WHEN s.pr THEN 'UNCONFIRMED' ELSE d.pr_state END,
        pr_error_message = CASE WHEN s.pr AND s.pr_unsent THEN :unsent_reason
                                WHEN s.pr THEN :reason ELSE d.pr_error_message END,
        -- The abandoned claim keeps its attempt number (a fence against its holder) but
        -- not its place in the budget: nothing was sent.
        pr_attempt_limit = d.pr_attempt_limit + CASE WHEN s.pr AND s.pr_unsent THEN 1 ELSE 0 END,
        pr_next_attempt_at = CASE WHEN s.pr AND s.pr_unsent THEN now()
                                  ELSE d.pr_next_attempt_at END,
        -- The public leg has a fixed budget: an abandoned claim counts, and the last one ends
        -- it FAILED (nothing was posted, nothing is left to try).
        pub_state = CASE WHEN s.pub AND s.pub_unsent AND s.pub_budget_left THEN 'PENDING'
                         WHEN s.pub AND s.pub_unsent THEN 'FAILED'
                         WHEN s.pub THEN 'UNCONFIRMED' ELSE d.pub_state END,
        pub_error_message = CASE
            WHEN s.pub AND s.pub_unsent AND s.pub_budget_left THEN :pub_unsent_reason
            WHEN s.pub AND s.pub_unsent THEN :pub_gave_up_reason
            WHEN s.pub THEN :pub_reason ELSE d.pub_error_message END,
        pub_next_attempt_at = CASE WHEN s.pub AND s.pub_unsent AND s.pub_budget_left THEN now()
                                   ELSE d.pub_next_attempt_at END,
        updated_at = now()
    FROM stale s WHERE d.id = s.id
    RETURNING d.id, s.pr, s.pr_unsent, s.pub, s.pub_unsent, s.pub_budget_left, s.trigger_kind,
              s.workspace_id, s.pr_claimed_at, d.pr_next_attempt_at, d.pub_next_attempt_at
),
quota AS (
    -- The claim reserved a DM of its month's quota; the next claim reserves again.
    UPDATE usage_counters u SET dms_reserved = u.dms_reserved - 1
    FROM legs l
    WHERE l.pr AND l.pr_unsent AND u.workspace_id = l.workspace_id
      AND u.month = CAST(date_trunc('month', l.pr_claimed_at AT TIME ZONE 'UTC') AS date)
      AND u.dms_reserved > 0
    RETURNING u.month
),
attempts AS (
    UPDATE delivery_attempts a SET finished_at = now(),
        classification = CASE
            WHEN a.leg = 'private_reply' AND l.pr_unsent THEN 'retryable'
            WHEN a.leg = 'public_reply' AND l.pub_unsent THEN 'retryable'
            ELSE 'ambiguous' END,
        error_message = CASE
            WHEN a.leg = 'private_reply' AND l.pr_unsent THEN :unsent_reason
            WHEN a.leg = 'private_reply' THEN :reason
            WHEN l.pub_unsent THEN :pub_unsent_reason
            ELSE :pub_reason END
    FROM legs l
    WHERE a.dm_log_id = l.id AND a.finished_at IS NULL
      AND ((l.pr AND a.leg = 'private_reply') OR (l.pub AND a.leg = 'public_reply'))
    RETURNING a.id
)
SELECT id, pr AND NOT pr_unsent AS pr, pub AND NOT pub_unsent AS pub,
       (pr AND pr_unsent) OR (pub AND pub_unsent AND pub_budget_left) AS resent,
       trigger_kind, LEAST(CASE WHEN pr AND pr_unsent THEN pr_next_attempt_at END,
                           CASE WHEN pub AND pub_unsent THEN pub_next_attempt_at END) AS due
FROM legs
"""  # noqa: S608 - composed from module constants; every value is a bound parameter
)
_REASONS = {
    "reason": (
        "no answer was recorded: the worker stopped (or lost its database) as the request was "
        "leaving for Instagram or after, so the message may have been delivered"
    ),
    "unsent_reason": (
        "the worker stopped before the request left, so nothing was sent; sending it again"
    ),
    "pub_reason": (
        "no answer was recorded: the worker stopped (or lost its database) as the reply was "
        "leaving for Instagram or after, so it may have been posted"
    ),
    "pub_unsent_reason": (
        "the worker stopped before the reply left, so nothing was posted; posting it again"
    ),
    "pub_gave_up_reason": (
        f"gave up after {MAX_PUBLIC_ATTEMPTS} attempts: the last stopped before the reply "
        "left, so nothing was posted"
    ),
}
STALE_REASON = _REASONS["reason"]
UNSENT_REASON = _REASONS["unsent_reason"]


@dataclass(frozen=True, slots=True)
class SweepResult:
    private: list[int]  # made UNCONFIRMED: the request may have left
    public: list[int]
    # Rows with a leg given back to PENDING (its request never left), their job enqueued.
    resent: list[int] = field(default_factory=list)


async def sweep_stale_claims(
    conn: AsyncConnection,
    queue: Queue | None,
    *,
    older_than_s: float,
    unsent_older_than_s: float | None = None,
    alive: Collection[str] = (),
    held_s: float = 0.0,
) -> SweepResult:
    """IN_FLIGHT legs older than `older_than_s` (a private one without its request note: older
    than `unsent_older_than_s`, by default the same): one whose request never left → PENDING,
    its job enqueued; any other → UNCONFIRMED, with an inbox check for a private one. A claim
    held by one of the `alive` workers is left alone until it is `held_s` old."""
    unsent = older_than_s if unsent_older_than_s is None else unsent_older_than_s
    params = {
        "older": older_than_s,
        "unsent_older": unsent,
        "alive": sorted(alive),
        "held": held_s,
        **_REASONS,
    }
    rows = (await conn.execute(_SWEEP, params)).all()
    result = SweepResult(
        private=[row.id for row in rows if row.pr],
        public=[row.id for row in rows if row.pub],
        resent=[row.id for row in rows if row.resent],
    )
    for row in rows:
        for leg, settled in (("private", row.pr), ("public", row.pub)):
            if settled:
                DELIVERIES.labels(row.trigger_kind, leg, "UNCONFIRMED").inc()
    if rows:
        logger.warning(
            "stale-claim sweep: %d private and %d public legs made UNCONFIRMED, "
            "%d rows with a leg never sent given back to PENDING",
            len(result.private),
            len(result.public),
            len(result.resent),
        )
    if queue is not None:
        for dm_log_id in result.private:
            await enqueue_verification(queue, dm_log_id)
        for row in rows:
            if row.resent:
                # Keyed by its due time: the dead worker's job may still hold `deliver:<id>`.
                await enqueue_delivery(queue, row.id, row.due, kind=row.trigger_kind)
    return result


_EXPIRE = text(
    """
UPDATE dm_logs SET
    pr_state = CASE WHEN pr_state = 'PENDING' THEN 'SKIPPED_WINDOW_EXPIRED' ELSE pr_state END,
    pr_error_message = CASE WHEN pr_state <> 'PENDING' THEN pr_error_message
        WHEN trigger_kind = 'comment' THEN :comment_reason ELSE :dm_reason END,
    pub_state = CASE WHEN pub_state = 'PENDING' THEN 'SKIPPED_WINDOW_EXPIRED' ELSE pub_state END,
    updated_at = now()
WHERE (pr_state = 'PENDING' OR pub_state = 'PENDING') AND deadline_at <= now()
RETURNING id
"""
)
_EXPIRED_REASONS = {
    "comment_reason": "the 7-day reply window closed while waiting",
    "dm_reason": "the 24-hour messaging window closed while waiting",
}

_DUE = text(
    """
SELECT d.id,
       LEAST(CASE WHEN d.pr_state = 'PENDING' THEN d.pr_next_attempt_at END,
             CASE WHEN d.pub_state = 'PENDING' THEN d.pub_next_attempt_at END) AS retry_at,
       d.trigger_kind
FROM dm_logs d JOIN instagram_accounts a ON a.id = d.account_id
WHERE a.status = 'active'
  AND ((d.pr_state = 'PENDING'
        AND COALESCE(d.pr_next_attempt_at, d.created_at) <= now() - make_interval(secs => :grace))
    OR (d.pub_state = 'PENDING'
        AND COALESCE(d.pub_next_attempt_at, d.created_at) <= now() - make_interval(secs => :grace)
        -- A public reply waiting for the public replies' budget is the pacer's too.
        AND NOT (d.pub_queued_at IS NOT NULL AND a.pub_backlog_since IS NOT NULL)))
  -- A comment waiting for the budget of an account with a backlog is its pacer's.
  AND NOT (d.trigger_kind = 'comment' AND d.pr_state = 'PENDING'
           AND a.pr_backlog_since IS NOT NULL)
ORDER BY d.id
LIMIT :limit
"""
)


_PACED = text(
    "SELECT id FROM instagram_accounts WHERE status = 'active' "
    "AND (pr_backlog_since IS NOT NULL OR pub_backlog_since IS NOT NULL)"
)


@dataclass(frozen=True, slots=True)
class RelayResult:
    resumed_accounts: int
    expired: int
    enqueued: int
    paced_accounts: int = 0
    checks: int = 0  # inbox checks queued again


# An UNCONFIRMED private leg whose inbox check has not concluded (no result noted) and that
# nothing touched for the grace period: its check job was lost (Redis) or never queued.
_UNCHECKED = text(
    """
SELECT id FROM dm_logs
WHERE pr_state = 'UNCONFIRMED' AND (pr_evidence -> 'inbox_check' ->> 'result') IS NULL
  AND updated_at <= now() - make_interval(secs => :grace)
ORDER BY updated_at
LIMIT :limit
"""
)


async def relay_due_work(
    conn: AsyncConnection,
    queue: Queue,
    *,
    grace_s: float = RELAY_GRACE_S,
    limit: int = RELAY_BATCH,
) -> RelayResult:
    resumed = await resume_expired_pauses(conn)
    expired = (await conn.execute(_EXPIRE, _EXPIRED_REASONS)).all()
    due = (await conn.execute(_DUE, {"grace": grace_s, "limit": limit})).all()
    enqueued = 0
    for dm_log_id, retry_at, kind in due:
        enqueued += await enqueue_delivery(queue, dm_log_id, retry_at, kind=kind)
    # Their pacers (a lost job, a Redis restart, an account back from a pause): a kick while
    # one is waiting changes nothing.
    paced = (await conn.execute(_PACED)).scalars().all()
    await kick_pacer(queue, paced)
    unchecked = (await conn.execute(_UNCHECKED, {"grace": grace_s, "limit": limit})).scalars()
    checks = 0
    for dm_log_id in unchecked.all():
        checks += await enqueue_verification(queue, dm_log_id, delay_s=0)
    if resumed or expired or due or checks:
        logger.info(
            "due-work relay: %d accounts resumed, %d legs expired, %d rows re-enqueued, "
            "%d inbox checks queued again",
            resumed,
            len(expired),
            enqueued,
            checks,
        )
    return RelayResult(resumed, len(expired), enqueued, len(paced), checks)
