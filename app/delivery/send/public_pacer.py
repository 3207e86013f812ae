"""The public replies' pacing: their own hourly budget handed out oldest first, holding no job
per waiting reply.

Public replies under comments have a budget of their own (`PUBLIC_REPLIES_PER_HOUR`,
`budget_history.public_reply_budget`). When a job finds it full, the public leg is left to the
account's pacer (`queue_public`): it stays PENDING, marked as waiting for a slot
(`dm_logs.pub_queued_at`), with the reason the creator reads (`PUBLIC_WAIT_REASON`), and the
account is marked as having public replies waiting (`instagram_accounts.pub_backlog_since`).
From then on every public leg of the account that is due joins that queue instead of taking a
slot itself, and the due-work relay leaves them to the pacer.

The account's pacer (`pacer.pace_account`) runs this part after it has handed out the private
replies' slots (`pace_public`): it grants as many waiting public legs as the public budget has
free slots, earliest deadline (oldest comment) first, in one statement (`pub_granted_at`,
`FOR UPDATE SKIP LOCKED`), takes their slots in one script (`HourlyBudget.grant`, named after
the rows), and enqueues one job per granted leg (`scheduling.enqueue_public_granted`), behind
the private replies it granted in the same run. A public reply never takes a private reply's
slot (the budgets are apart) and never waits in a DM's place: its job comes after the DMs the
pacer handed out, and a public leg waiting for the DM (`recording.hold_public`) is not due.
With nothing left to the pacer (neither waiting nor granted and not yet claimed) the account's
mark is cleared. A grant whose job was lost is granted again after `GRANT_TTL_S`; when Redis
restarted and lost the queue with the budget, at once: the budget's rebuild gives up the
grants not yet claimed (`budget_history`). Two pacers of one account cannot hand out one
slot twice (the rows are locked by the statement, the slots by the script).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from app.delivery.send.budget import (
    GRANT_TTL_S,
    MAX_GRANTS,
    batch_size,
    grant_member,
    grant_stamp,
)
from app.delivery.send.budget_history import public_reply_budget
from app.delivery.send.legs import MAX_PUBLIC_ATTEMPTS
from app.delivery.send.scheduling import enqueue_public_granted
from app.delivery.send.throttle import SLOWED, Pace
from app.resources import Resources

PUBLIC_WAIT_REASON = (
    "waiting: this account's public replies reached their hourly limit; it is posted when a "
    "slot frees, oldest comments first"
)

# A reply whose window closed is not waiting: the due-work relay settles it.
_WAITING = f"""d.account_id = :account_id AND d.pub_state = 'PENDING'
  AND d.pub_queued_at IS NOT NULL AND d.pub_attempts < {MAX_PUBLIC_ATTEMPTS}
  AND d.deadline_at > now()
  AND (d.pub_next_attempt_at IS NULL OR d.pub_next_attempt_at <= now())
  AND (d.pub_granted_at IS NULL
       OR d.pub_granted_at < now() - make_interval(secs => :grant_ttl))"""

_GRANT = text(
    f"""
WITH chosen AS (
    SELECT d.id FROM dm_logs d
    WHERE {_WAITING}
    ORDER BY d.deadline_at, d.id
    LIMIT :n
    FOR UPDATE SKIP LOCKED
)
UPDATE dm_logs d SET pub_granted_at = now(), updated_at = now()
FROM chosen c WHERE d.id = c.id
RETURNING d.id, d.deadline_at, d.pub_granted_at
"""  # noqa: S608 - module constants only; every value is a bound parameter
)
_UNGRANT = text(
    "UPDATE dm_logs SET pub_granted_at = NULL "
    "WHERE id = ANY(:ids) AND pub_state = 'PENDING' AND pub_granted_at = :granted_at"
)
# Left to the pacer and not claimed yet: granted, not due yet, or waiting for a slot. While
# any is, the account keeps its mark (and the pacer its runs), so the public legs that come
# meanwhile join the queue and the relay leaves them all alone.
_QUEUED = f"""d.account_id = :account_id AND d.pub_state = 'PENDING'
  AND d.pub_queued_at IS NOT NULL AND d.pub_attempts < {MAX_PUBLIC_ATTEMPTS}
  AND d.deadline_at > now()"""
_ANY_QUEUED = text(f"SELECT EXISTS (SELECT 1 FROM dm_logs d WHERE {_QUEUED})")  # noqa: S608
_CLEAR_BACKLOG = text(
    f"""
UPDATE instagram_accounts SET pub_backlog_since = NULL
WHERE id = :account_id AND pub_backlog_since IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM dm_logs d WHERE {_QUEUED})
"""  # noqa: S608 - module constants only
)
# The public leg waits for the pacer, and its account has public replies waiting from now on.
_QUEUE_PUBLIC = text(
    """
WITH leg AS (
    UPDATE dm_logs SET pub_queued_at = COALESCE(pub_queued_at, now()),
        pub_next_attempt_at = NULL, pub_granted_at = NULL,
        pub_error_message = :reason, updated_at = now()
    WHERE id = :id AND pub_state = 'PENDING'
    RETURNING account_id
)
UPDATE instagram_accounts a SET pub_backlog_since = now()
FROM leg WHERE a.id = leg.account_id AND a.pub_backlog_since IS NULL
"""
)


@dataclass(frozen=True, slots=True)
class PublicPace:
    granted: int
    # Seconds until the pacer should look again for the public replies; None: none wait.
    next_run_in_s: float | None


async def queue_public(conn: AsyncConnection, dm_log_id: int) -> None:
    """Leave a PENDING public reply to its account's pacer (the caller kicks the pacer)."""
    await conn.execute(_QUEUE_PUBLIC, {"id": dm_log_id, "reason": PUBLIC_WAIT_REASON})


async def pace_public(
    resources: Resources, conn: AsyncConnection, account_id: int, pace: Pace
) -> PublicPace:
    """Hand out the public budget's free slots to the waiting public replies, oldest first;
    the caller (the account's pacer) has handed out the private replies' slots already and
    runs again in `next_run_in_s`. Follows the account's pace like the private replies (the
    caller does not come here while the account is paused)."""
    budget = public_reply_budget(resources)
    batch = batch_size(budget.limit)
    params: dict[str, object] = {"account_id": account_id, "grant_ttl": GRANT_TTL_S}
    step_s = budget.window_s * batch / budget.limit
    # Slowed: at most one grant a step, however often the pacer runs (each batch of private
    # replies ends with a run).
    gate_s = step_s if pace.mode == SLOWED else 0.0
    free = await budget.free(account_id, batch=batch, step_s=gate_s)
    next_free_s, batch_free_s = free.next_free_s, free.batch_free_s
    want = min(free.free, MAX_GRANTS)
    if pace.share < 1:
        want = min(want, max(1, int(pace.share * batch)))
    granted = 0
    if want > 0:
        chosen = await conn.execute(_GRANT, {**params, "n": want})
        rows = sorted(chosen.all(), key=lambda row: (row.deadline_at, row.id))
        grants = [(row.id, row.pub_granted_at) for row in rows]
        taken = await budget.grant(
            account_id, [grant_member(i, at) for i, at in grants], batch=batch, step_s=gate_s
        )
        if taken.taken < len(grants):
            # Another process took slots between the count and the grant.
            await conn.execute(
                _UNGRANT,
                {"ids": [i for i, _ in grants[taken.taken :]], "granted_at": grants[0][1]},
            )
        granted = taken.taken
        await enqueue_public_granted(
            resources.queue, [(i, grant_stamp(at)) for i, at in grants[:granted]]
        )
        if grants:
            next_free_s, batch_free_s = taken.next_free_s, taken.batch_free_s
    if not (await conn.execute(_ANY_QUEUED, params)).scalar():
        await conn.execute(_CLEAR_BACKLOG, params)
        return PublicPace(granted, None)
    wait_s = max(next_free_s, step_s if pace.mode == SLOWED else batch_free_s)
    # Slots free but nothing to grant them (the queued legs are granted, or not due yet): a
    # batch's time, not a run straight away.
    return PublicPace(granted, wait_s or step_s)
