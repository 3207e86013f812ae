"""The per-account pacer: the hourly private-reply budget handed out earliest deadline first.

When a comment's job finds the account's budget full, the comment waits without a job of its
own (`queue_for_budget`): the row stays PENDING and due, and the account is marked as having a
backlog (`instagram_accounts.pr_backlog_since`). From then on ingestion, the due-work relay and
any job that meets such a row leave it to the account's pacer (`pace_account`, one job keyed
`pace:<account id>`), which on each run:

1. asks the budget how many slots are free;
2. grants that many waiting rows, earliest deadline (oldest comment) first, in one statement
   (`pr_granted_at`, `FOR UPDATE SKIP LOCKED`), and takes their slots in one Redis script,
   named after the rows (`grant_member`); a row whose slot another process took meanwhile is
   given back its place;
3. enqueues one delivery job per granted row, and nothing for the others;
4. when the budget is full, settles the rows whose 7-day window closes before the next slot
   frees as SKIPPED_WINDOW_EXPIRED — they can no longer make it;
5. hands out the public replies' own budget likewise (`public_pacer.pace_public`), after
   the private replies;
6. runs again when a batch of slots (`batch_size`) will be free, or, with nothing left
   waiting, clears the account's backlog mark.

A batch at a time: a grant takes at most `batch_size` slots, and only once no slot of the
account is in flight (granted or sending, unanswered; `HourlyBudget.grantable`), so the
account's sends go out in deadline order to within one batch. The job whose send ends a
batch runs the pacer for the next one itself (`batch_settled`); the pacer also looks again
every `IN_FLIGHT_LOOK_S` while a batch is in flight. One run of an account's pacer at a time
(`_Turn`): a run asked for meanwhile makes the one under way run again. A run holds its turn
on a lease it renews (`TURN_LEASE_S`), so a worker that dies mid-run holds the account's
pacer back one lease at most: the run that found the turn taken looks again when it lapses.

It follows the account's pace (`throttle`): slowed, it hands out a share of the usual rate;
paused by a rate limit, nothing until the time Meta stated (the budget refuses every slot
meanwhile, so no other job sends either). While the account is slowed no job takes a slot of
its own either (`budget.HourlyBudget.reserve` refuses), so every send goes through the pacer
at the slowed share, granted at most once a step however often the pacer is woken (the
budget's scripts keep the step in the pace's hash). Each change is recorded once as an
operational event (`pace_slowed`, `pace_paused`, `pace_resumed`) by whoever notes it first
(`note_pace`): the send whose answer changed the pace, or the pacer.

A private reply refused with a rate-limit code comes back to the pacer too (its record
statement clears its grant and marks the backlog, `recording.record`): it waits for its turn,
earliest deadline first, at the pace Meta's answers set, not for a fixed retry time.

So the work per delivered DM stays constant however long the backlog grows, and two pacers of
one account (two workers, a relay's kick racing a scheduled run) cannot hand out a slot twice:
the rows are locked by the statement and the slots by the script. A granted row whose job was
lost is granted again after `GRANT_TTL_S`; when Redis restarted and lost the queue with the
budget, at once: the budget's rebuild gives up the grants not yet claimed (`budget_history`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from dataclasses import dataclass

from redis.asyncio import Redis
from redis.exceptions import RedisError
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection

from app.db.engine import autocommit
from app.db.models import EventLevel
from app.delivery.send.budget import (
    GRANT_TTL_S,
    MAX_GRANTS,
    Slot,
    batch_size,
    grant_member,
    grant_stamp,
)
from app.delivery.send.budget_history import account_budget
from app.delivery.send.public_pacer import pace_public
from app.delivery.send.scheduling import enqueue_granted, kick_pacer
from app.delivery.send.throttle import NORMAL, PAUSED, SLOWED, Pace, Throttle
from app.operations.events import record_event
from app.resources import Resources

logger = logging.getLogger("oncereply.delivery")

# While a batch is in flight the pacer grants nothing; the batch's last send wakes it
# (`batch_settled`), and it looks again after this long besides, should that wake be lost.
IN_FLIGHT_LOOK_S = 1.0

MISSED_REASON = "the 7-day reply window closes before the hourly budget has a slot for it"
WAITING_REASON = "waiting for a slot in the account's hourly private-reply budget"

_WAITING = """d.account_id = :account_id AND d.trigger_kind = 'comment'
  AND d.pr_state = 'PENDING' AND d.pr_attempts < d.pr_attempt_limit
  AND (d.pr_next_attempt_at IS NULL OR d.pr_next_attempt_at <= now())
  AND (d.pr_granted_at IS NULL
       OR d.pr_granted_at < now() - make_interval(secs => :grant_ttl))"""

_ACCOUNT_OF = text("SELECT account_id FROM dm_logs WHERE id = :id")
_ACCOUNT = text(
    """
SELECT a.workspace_id, (a.status = 'active' OR (a.status = 'paused'
        AND a.paused_until IS NOT NULL AND a.paused_until <= now())) AS can_send,
       a.pr_backlog_since IS NOT NULL AS backlog
FROM instagram_accounts a WHERE a.id = :account_id
"""
)
_GRANT = text(
    f"""
WITH chosen AS (
    SELECT d.id FROM dm_logs d
    WHERE {_WAITING} AND d.deadline_at > now()
    ORDER BY d.deadline_at, d.id
    LIMIT :n
    FOR UPDATE SKIP LOCKED
)
UPDATE dm_logs d SET pr_granted_at = now(), updated_at = now()
FROM chosen c WHERE d.id = c.id
RETURNING d.id, d.deadline_at, d.pr_granted_at
"""  # noqa: S608 - module constants only; every value is a bound parameter
)
_UNGRANT = text(
    "UPDATE dm_logs SET pr_granted_at = NULL "
    "WHERE id = ANY(:ids) AND pr_state = 'PENDING' AND pr_granted_at = :granted_at"
)
_SKIP_MISSED = text(
    f"""
UPDATE dm_logs d SET pr_state = 'SKIPPED_WINDOW_EXPIRED', pr_error_message = :reason,
    pr_granted_at = NULL, updated_at = now()
WHERE {_WAITING} AND d.deadline_at <= now() + make_interval(secs => :free_in)
RETURNING d.id
"""  # noqa: S608 - module constants only
)
_COUNT_WAITING = text(
    f"SELECT count(*) FROM (SELECT 1 FROM dm_logs d WHERE {_WAITING} LIMIT :n) w"  # noqa: S608
)
_ANY_WAITING = text(f"SELECT EXISTS (SELECT 1 FROM dm_logs d WHERE {_WAITING})")  # noqa: S608
_CLEAR_BACKLOG = text(
    f"""
UPDATE instagram_accounts SET pr_backlog_since = NULL
WHERE id = :account_id AND pr_backlog_since IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM dm_logs d WHERE {_WAITING})
"""  # noqa: S608 - module constants only
)
_MARK_BACKLOG = text(
    "UPDATE instagram_accounts SET pr_backlog_since = now() "
    "WHERE id = :account_id AND pr_backlog_since IS NULL"
)
# The row waits for the pacer, and its account has a backlog from now on.
_QUEUE_FOR_BUDGET = text(
    """
WITH leg AS (
    UPDATE dm_logs SET pr_next_attempt_at = NULL, pr_granted_at = NULL,
        pr_error_message = :reason, updated_at = now()
    WHERE id = :id AND pr_state = 'PENDING'
    RETURNING account_id
)
UPDATE instagram_accounts a SET pr_backlog_since = now()
FROM leg WHERE a.id = leg.account_id AND a.pr_backlog_since IS NULL
"""
)


@dataclass(slots=True)
class PaceReport:
    granted: int = 0
    public_granted: int = 0
    missed: int = 0
    next_run_in_s: float | None = None
    pace: str = NORMAL
    note: str = ""

    def as_dict(self) -> dict[str, object]:
        return {
            "pace": self.pace,
            "granted": self.granted,
            "public_granted": self.public_granted,
            "missed": self.missed,
            "next_run_in_s": self.next_run_in_s,
            "note": self.note,
        }


async def mark_backlog(conn: AsyncConnection, account_id: int) -> None:
    """The account's private replies go through its pacer from now on."""
    await conn.execute(_MARK_BACKLOG, {"account_id": account_id})


async def more_waiting_than(conn: AsyncConnection, account_id: int, slots: int) -> bool:
    """Whether more of the account's comments wait for a private reply than `slots` (counted
    no further than that)."""
    counted = await conn.execute(
        _COUNT_WAITING, {"account_id": account_id, "grant_ttl": GRANT_TTL_S, "n": slots + 1}
    )
    return int(counted.scalar() or 0) > slots


async def queue_for_budget(conn: AsyncConnection, dm_log_id: int) -> None:
    """Leave a PENDING private reply to its account's pacer (the caller kicks the pacer)."""
    await conn.execute(_QUEUE_FOR_BUDGET, {"id": dm_log_id, "reason": WAITING_REASON})


@dataclass(frozen=True, slots=True)
class GivenBack:
    """What `release_unused_grant` knows after: the row's account, and the account's slots
    still in flight (None when the slot could not be given back)."""

    account_id: int | None
    in_flight: int | None = None


async def release_unused_grant(
    resources: Resources,
    dm_log_id: int,
    grant: int,
    *,
    account_id: int | None = None,
    conn: AsyncConnection | None = None,
) -> GivenBack:
    """A granted job ended without using its slot (its row was settled meanwhile, its account
    could not send, or its leg was not due): the slot goes back now rather than when the grant
    lapses. Nobody else uses it: the slot is named after the row and this grant. Without the
    row's `account_id`, it is read on `conn`."""
    try:
        if account_id is None and conn is not None:
            account_id = (await conn.execute(_ACCOUNT_OF, {"id": dm_log_id})).scalar()
        if account_id is None:
            return GivenBack(None)
        slot = Slot(account_id, grant_member(dm_log_id, grant))
        return GivenBack(account_id, await account_budget(resources).release(slot))
    except (RedisError, OSError):
        # It frees when the grant lapses.
        logger.warning("could not give back an unused grant of row %s", dm_log_id)
    return GivenBack(account_id)


async def batch_settled(
    resources: Resources, account_id: int, in_flight: int | None = None
) -> None:
    """A granted job is over: when no other slot of the account is in flight, its batch is
    sent, and this job runs the account's pacer for the next batch itself, at once (a job of
    its own would cost a run per batch), rather than leave it to the pacer's next look
    (`IN_FLIGHT_LOOK_S`). `in_flight` is the count the job's last give-back or stamp of its
    slot answered (`HourlyBudget.release`, `HourlyBudget.stamp`): then nothing is read again.
    Of a batch's jobs, the one whose slot was the last in flight sees 0."""
    try:
        if in_flight is None:
            in_flight = await account_budget(resources).in_flight(account_id)
        if in_flight == 0:
            await pace_account(resources, account_id)
    except (RedisError, OSError, SQLAlchemyError):
        # The pacer's next look grants the batch.
        logger.warning("could not run the pacer of account %s", account_id, exc_info=True)


async def pace_changed(
    resources: Resources, throttle: Throttle, workspace_id: int, account_id: int, lapses_in_s: float
) -> None:
    """The account's pace changed (`throttle`): the change is recorded now (in a short window a
    slow-down may lapse before the pacer runs), the pacer runs to act on it, and again when it
    lapses, to record that."""
    await note_pace(resources, throttle, workspace_id, account_id)
    await kick_pacer(resources.queue, [account_id])
    await kick_pacer(resources.queue, [account_id], at=time.time() + lapses_in_s + 0.5)


async def note_pace(
    resources: Resources, throttle: Throttle, workspace_id: int, account_id: int
) -> Pace:
    """The account's pace now, recorded as an operational event when it is not the one last
    noted: whoever notes a change first (the send that saw it, or the pacer) records it, once."""
    pace, previous = await throttle.note(account_id)
    if previous is not None:
        await _record_change(resources, workspace_id, account_id, previous, pace)
    return pace


async def pace_account(resources: Resources, account_id: int) -> PaceReport:
    """One run of the account's pacer; see the module docstring. Runs of one account take
    turns (`_Turn`): two at once would each lock rows for a batch, and the one whose later
    rows got the slots first would send them ahead of the other's."""
    turn = _Turn(resources.redis, account_id)
    report = PaceReport(note="another run of this account's pacer is under way")
    for _ in range(_MOST_TURNS):
        lapses_in_s = await turn.take()
        if lapses_in_s is not None:
            # The run under way runs once more when it ends; should its worker have died
            # holding the turn, a run once its lease lapses takes over.
            await kick_pacer(resources.queue, [account_id], at=time.time() + lapses_in_s)
            return report
        keeper = asyncio.create_task(turn.keep())
        try:
            report = await _pace(resources, account_id)
        finally:
            keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await keeper
            again = await turn.end()
        if not again:
            break
    return report


# A run that was asked for while another ran runs again at most this many times in a row;
# past that, its next look (which every run schedules) is soon enough.
_MOST_TURNS = 3
_TURN_KEY = "oncereply:pacer-turn:{account_id}"
_AGAIN_KEY = "oncereply:pacer-again:{account_id}"
# A run holds its turn on a lease it renews while it runs, so a worker that dies holding it
# (SIGKILL, a lost host) stalls the account's pacer one lease at most, however long a live run
# takes. A run delayed past its lease (its process stalled that long) may overlap the next:
# that costs order within a batch, never a slot (the rows are locked, the slots scripted).
TURN_LEASE_S = 6.0
_TURN_RENEW_S = TURN_LEASE_S / 3
# KEYS[1] the turn, KEYS[2] the "again" mark; ARGV[1] this run's token, ARGV[2] the lease in
# ms. {1, 0}: this run's turn; {0, ms until the holder's lease lapses}: another run's, which
# is asked to run again when it ends.
_TAKE_TURN = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return {1, 0} end
redis.call('SET', KEYS[2], '1', 'PX', ARGV[2])
return {0, redis.call('PTTL', KEYS[1])}
"""
# The run under way renews its lease (and the mark asking it to run again); 0 when the turn is
# no longer its own.
_KEEP_TURN = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return 1
"""
# 1 when another run was asked for meanwhile (this one runs again).
_END_TURN = """
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
if redis.call('DEL', KEYS[2]) == 1 then return 1 end
return 0
"""


class _Turn:
    """One account's pacer runs one at a time; a run asked for meanwhile is not lost: the run
    under way runs once more (one script to take the turn or leave that mark, one to give it
    back and read the mark; a run longer than `_TURN_RENEW_S` renews its lease)."""

    def __init__(self, redis: Redis, account_id: int) -> None:
        self._redis = redis
        self._keys = [
            _TURN_KEY.format(account_id=account_id),
            _AGAIN_KEY.format(account_id=account_id),
        ]
        self._token = uuid.uuid4().hex
        self._lease_ms = int(TURN_LEASE_S * 1000)

    async def take(self) -> float | None:
        """None: this run's turn; else seconds until the holder's lease lapses."""
        script = self._redis.register_script(_TAKE_TURN)
        taken, lapses_ms = await script(keys=self._keys, args=[self._token, self._lease_ms])
        return None if int(taken) == 1 else max(0, int(lapses_ms)) / 1000.0

    async def keep(self) -> None:
        """Renew the lease while the run goes on (cancelled when it ends)."""
        script = self._redis.register_script(_KEEP_TURN)
        try:
            while True:
                await asyncio.sleep(_TURN_RENEW_S)
                if not int(await script(keys=self._keys, args=[self._token, self._lease_ms])):
                    # Lapsed while this process stalled: another run may be under way.
                    return
        except (RedisError, OSError):
            logger.warning("could not renew the pacer's turn %s", self._keys[0])

    async def end(self) -> bool:
        script = self._redis.register_script(_END_TURN)
        return int(await script(keys=self._keys, args=[self._token])) == 1


async def _pace(resources: Resources, account_id: int) -> PaceReport:
    report = PaceReport()
    budget = account_budget(resources)
    batch = batch_size(budget.limit)
    params: dict[str, object] = {"account_id": account_id, "grant_ttl": GRANT_TTL_S}
    async with autocommit(resources.engine) as conn:
        account = (await conn.execute(_ACCOUNT, params)).first()
        if account is None or not account.can_send:
            # The relay kicks the pacer again once the account is back.
            report.note = "the account cannot send now"
            return report
        # Slowed: a share of the usual rate, `share × batch` slots every `step_s`, at most one
        # grant per step (the budget's scripts keep the step, whoever wakes the pacer).
        step_s = budget.window_s * batch / budget.limit
        # The pace, noted (`note_pace`), and the free slots, in one script.
        look = await budget.look(account_id, batch=batch, step_s=step_s)
        pace = Pace(look.mode, look.share, look.remaining_s)
        if look.previous is not None:
            await _record_change(resources, account.workspace_id, account_id, look.previous, pace)
        report.pace = pace.mode
        if pace.mode == PAUSED:
            report.note = "paused: Instagram asked to wait"
            return await _again(resources, report, account_id, pace.remaining_s)
        gate_s = step_s if pace.mode == SLOWED else 0.0
        free = look.free
        next_free_s, batch_free_s = free.next_free_s, free.batch_free_s
        # Without a backlog (a run for the public replies alone) the rows have jobs of their own.
        # One batch at a time, once the one before is sent (`HourlyBudget.grantable`).
        want = min(budget.grantable(free), MAX_GRANTS) if account.backlog else 0
        if pace.share < 1:
            want = min(want, max(1, int(pace.share * batch)))
        if want > 0:
            chosen = await conn.execute(_GRANT, {**params, "n": want})
            rows = sorted(chosen.all(), key=lambda row: (row.deadline_at, row.id))
            grants = [(row.id, row.pr_granted_at) for row in rows]
            taken = await budget.grant(
                account_id, [grant_member(i, at) for i, at in grants], batch=batch, step_s=gate_s
            )
            if taken.taken < len(grants):
                # Another process took slots between the count and the grant.
                await conn.execute(
                    _UNGRANT,
                    {"ids": [i for i, _ in grants[taken.taken :]], "granted_at": grants[0][1]},
                )
            granted = grants[: taken.taken]
            report.granted = len(granted)
            await enqueue_granted(resources.queue, [(i, grant_stamp(at)) for i, at in granted])
            next_free_s, batch_free_s = taken.next_free_s, taken.batch_free_s
        if next_free_s > 0:
            # The budget is full: whoever cannot wait for the next slot misses its window.
            missed = await conn.execute(
                _SKIP_MISSED, {**params, "free_in": next_free_s, "reason": MISSED_REASON}
            )
            report.missed = len(missed.all())
            if report.missed:
                logger.info(
                    "account %s: %d comments can no longer get their private reply in time",
                    account_id,
                    report.missed,
                )
        # The public replies after the private ones, from a budget of their own.
        public = await pace_public(resources, conn, account_id, pace)
        report.public_granted = public.granted
        if not account.backlog or not (await conn.execute(_ANY_WAITING, params)).scalar():
            await conn.execute(_CLEAR_BACKLOG, params)
            report.note = "nothing left waiting"
            if public.next_run_in_s is None:
                return report
            return await _again(resources, report, account_id, public.next_run_in_s)
    wait_s = max(next_free_s, step_s if pace.mode == SLOWED else batch_free_s)
    if wait_s <= 0:
        # Slots are free, but a batch is in flight (its last send wakes the pacer).
        wait_s = IN_FLIGHT_LOOK_S
    if public.next_run_in_s is not None:
        wait_s = min(wait_s, public.next_run_in_s)
    return await _again(resources, report, account_id, wait_s)


async def _again(
    resources: Resources, report: PaceReport, account_id: int, wait_s: float
) -> PaceReport:
    report.next_run_in_s = wait_s
    await kick_pacer(resources.queue, [account_id], at=time.time() + wait_s)
    return report


_CHANGES = {
    SLOWED: (
        "pace_slowed",
        EventLevel.INFO,
        "Instagram says this account is near its sending limit: private replies slowed "
        "to {percent}% of the usual pace",
    ),
    PAUSED: (
        "pace_paused",
        EventLevel.WARNING,
        "Instagram asked this account to wait: private replies paused for about {wait}",
    ),
    NORMAL: ("pace_resumed", EventLevel.INFO, "private replies are back to the usual pace"),
}


async def _record_change(
    resources: Resources, workspace_id: int, account_id: int, previous: str, pace: Pace
) -> None:
    kind, level, words = _CHANGES[pace.mode]
    wait = pace.remaining_s
    message = words.format(
        percent=round(pace.share * 100),
        wait=f"{wait / 60:.0f} min" if wait >= 90 else f"{wait:.0f} s",
    )
    async with resources.sessionmaker() as session:
        await record_event(
            session,
            source="pacer",
            level=level,
            kind=kind,
            message=message,
            workspace_id=workspace_id,
            account_id=account_id,
            details={"from": previous, "to": pace.mode, "share": pace.share, "for_s": wait},
        )
        await session.commit()
