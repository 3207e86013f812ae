"""The hourly private-reply budget of each account, as atomic Redis scripts.

Meta allows 750 private replies per rolling hour per account. Each slot is a member of a sorted
set scored by its time; a slot is taken while fewer than `limit` members are younger than the
window, otherwise the script answers when the oldest one ages out. Time comes from the Redis
server, so workers on different hosts agree on it. Two ways to take slots:

- `reserve`: one slot for one send (a comment found with no backlog); none from the private
  replies' budget while the account is slowed (`throttle`): its sends then go through its
  pacer, which hands out only the slowed share of the slots;
- `grant`: the account's pacer takes as many of the free slots as it has rows waiting, named
  after the rows (`grant_member`), and the row's job `confirm`s its slot just before the send;
  while the account is slowed, at most once per step of its pace (the pace hash's
  `next_grant`), however often the pacer is woken meanwhile. The private replies' budget
  holds a granted slot until its grant lapses (`grant_hold_s`, `GRANT_TTL_S`), however long
  its job waits in the queue: were it to age out with the window first, the pacer would hand
  the same slot to a newer row while the older one's job was still queued, and on a busy
  worker the older row would lose its slot again and again to newer ones. A granted job that
  does not use its slot gives it back.

A slot taken for a send is scored with the latest time Meta could count the message (now plus
the longest a send may take, `in_flight_s`); after the call it is `stamp`ed with the time the
answer came. Either way it frees one window after Meta's own count began, never before, even
when a call takes a good part of the window. A definite rejection gives its slot back
(`release`); an ambiguous one keeps it. A rebuild (below) knows a send by its attempt row, not
by the job's slot, and counts one still unanswered in flight under the row's name
(`attempt_member`): the job records the answer before it stamps or gives back its slot, and
does so under its attempt rows' names too, in the same script, so a send answered while the
budget was rebuilt is not left counted in flight for the rest of `in_flight_s`.

Redis may keep nothing on disk: a restart loses the sorted set. Every script first checks the
account's "built" marker; when it is missing, the budget is rebuilt from the `history` the
caller gives (the sends recorded in PostgreSQL, `budget_history`) before anything is taken, so
the cap per rolling window holds across the restart.

Public replies under comments have a budget of their own (`budget=PUBLIC`, the cap
`PUBLIC_REPLIES_PER_HOUR`), built the same way from their own attempts, so they never take a
private reply's slot; a pause of the account's pace stops both.

Redis being down makes these raise: the caller then waits and tries later; it never sends
without a slot.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from redis.asyncio import Redis
from redis.commands.core import AsyncScript
from redis.exceptions import RedisError

_KEY = "oncereply:{budget}-budget:{{account_id}}"
_BUILT = "oncereply:{budget}-budget-built:{{account_id}}"
# The private-reply budget's name; public replies have a budget of their own ("pub").
PRIVATE = "pr"
PUBLIC = "pub"
# The account's pace (`throttle`): while its mode is "paused", no slot is taken.
PACE_KEY = "oncereply:pr-pace:{account_id}"
# The pace mode last noted (`throttle.Throttle.note`, `HourlyBudget.look`): whoever notes a
# change first records it.
PACE_SEEN_KEY = "oncereply:pr-pace-seen:{account_id}"
# How long a grant holds its slot for its job: after that the row is granted again (its job
# was lost), and until then no other row is granted that slot.
GRANT_TTL_S = 120.0
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# The most rows one pacer run grants (the budget's limit may be set far above Meta's 750).
MAX_GRANTS = 1000
_MICROSECOND = timedelta(microseconds=1)

# Every script: KEYS[1] the sorted set, KEYS[2] the built marker, KEYS[3] the pace; ARGV[1]
# limit, ARGV[2] window ms. Answers {-1, 0} when the budget must be rebuilt first.
_PRELUDE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('EXISTS', KEYS[2]) == 0 then return {-1, 0} end
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local function paused_for()
  if redis.call('HGET', KEYS[3], 'mode') ~= 'paused' then return 0 end
  local ttl = redis.call('PTTL', KEYS[3])
  if ttl < 1 then return 0 end
  return ttl
end
-- While the account is slowed its pacer grants at most once per step (ARGV step ms, 0 when
-- not slowed): the pace hash keeps when the next grant may be. Ms until then, or 0.
local function gated(step, field)
  if step <= 0 then return 0 end
  local nxt = tonumber(redis.call('HGET', KEYS[3], field) or '0')
  if nxt > now then return nxt - now end
  return 0
end
-- A slot scored ahead of now (a send in flight, a grant not yet used) is counted as if used
-- now: the soonest it can free, so whoever waits for it looks again early rather than late.
-- Slots scored ahead of now: grants whose jobs have not sent yet, sends not answered yet.
local function in_flight()
  return redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf')
end
local function wait_for(rank)
  local nth = redis.call('ZRANGE', KEYS[1], rank, rank, 'WITHSCORES')
  if nth[2] == nil then return 0 end
  local at = tonumber(nth[2])
  if at > now then at = now end
  local wait = at + window - now
  if wait < 1 then wait = 1 end
  return wait
end
"""

# ARGV[3] member, ARGV[4] in-flight ms, ARGV[5] '1' to refuse while the account is slowed,
# ARGV[6] the most slots in flight at once (0: no limit). {1, 0} taken, or {0, ms until the
# oldest slot frees or the pause ends}; {0, 1} while slowed or with that many in flight.
_RESERVE = (
    _PRELUDE
    + """
local paused = paused_for()
if paused > 0 then return {0, paused} end
if ARGV[5] == '1' and redis.call('HGET', KEYS[3], 'mode') == 'slowed'
    and redis.call('PTTL', KEYS[3]) > 0 then
  return {0, 1}
end
local most = tonumber(ARGV[6])
if most > 0 and in_flight() >= most then return {0, 1} end
if redis.call('ZCARD', KEYS[1]) < limit then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[4]), ARGV[3])
  redis.call('PEXPIRE', KEYS[1], window + tonumber(ARGV[4]))
  return {1, 0}
end
return {0, wait_for(0)}
"""
)

# ARGV[3] member, ARGV[4] in-flight ms. A granted slot about to be used: still held → scored
# as the send's; aged out (its job ran late) → taken again if there is room. {1, 0} or {0, ms
# until a slot frees}.
_CONFIRM = (
    _PRELUDE
    + """
local paused = paused_for()
if paused > 0 then return {0, paused} end
if redis.call('ZSCORE', KEYS[1], ARGV[3]) or redis.call('ZCARD', KEYS[1]) < limit then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[4]), ARGV[3])
  redis.call('PEXPIRE', KEYS[1], window + tonumber(ARGV[4]))
  return {1, 0}
end
return {0, wait_for(0)}
"""
)

# ARGV[3] how many slots the pacer wants next time, ARGV[4] the slowed pace's step in ms (0:
# not slowed), ARGV[5] how long a grant holds its slot (ms), ARGV[6] the most slots one grant
# takes (0: no limit; then none while any slot is in flight), ARGV[7] the pace hash's field
# that keeps this budget's next grant while slowed, ARGV[8..] members in order.
# Takes the first members that fit, each scored at the end of its hold (its job's `confirm`
# scores it as a send): {taken, ms until the oldest slot frees or the step ends (0: room
# left), ms until ARGV[3] slots are free}.
_GRANT = (
    _PRELUDE
    + """
local step = tonumber(ARGV[4])
local gate = gated(step, ARGV[7])
if gate > 0 then return {0, gate, gate} end
local used = redis.call('ZCARD', KEYS[1])
local hold = tonumber(ARGV[5])
local most = tonumber(ARGV[6])
local room = #ARGV
if most > 0 then
  room = most
  if in_flight() > 0 then room = 0 end
end
local taken = 0
for i = 8, #ARGV do
  if used >= limit or taken >= room then break end
  redis.call('ZADD', KEYS[1], now + hold, ARGV[i])
  used = used + 1
  taken = taken + 1
end
if taken > 0 then redis.call('PEXPIRE', KEYS[1], window + hold) end
if taken > 0 and step > 0 and redis.call('EXISTS', KEYS[3]) == 1 then
  redis.call('HSET', KEYS[3], ARGV[7], now + step)
end
if used < limit then return {taken, 0, 0} end
local want = tonumber(ARGV[3])
if want > limit then want = limit end
if want < 1 then want = 1 end
return {taken, wait_for(0), wait_for(want - 1)}
"""
)

# ARGV[3], ARGV[4] as for _GRANT, ARGV[5] as _GRANT's ARGV[7]. {free slots, ms until the
# oldest slot frees or the step ends, ms until ARGV[3] slots are free (both 0 when some are
# free), slots in flight, the account's pace mode ('normal' when none holds)}.
_FREE = (
    _PRELUDE
    + """
local gate = gated(tonumber(ARGV[4]), ARGV[5])
local flying = in_flight()
local mode = redis.call('HGET', KEYS[3], 'mode')
if not mode or redis.call('PTTL', KEYS[3]) < 1 then mode = 'normal' end
if gate > 0 then return {0, gate, gate, flying, mode} end
local used = redis.call('ZCARD', KEYS[1])
if used < limit then return {limit - used, 0, 0, flying, mode} end
local want = tonumber(ARGV[3])
if want > limit then want = limit end
if want < 1 then want = 1 end
return {0, wait_for(0), wait_for(want - 1), flying, mode}
"""
)


def note_pace(pace: str, noted: str) -> str:
    """Lua that reads the pace in the hash `pace` into locals `mode`, `share` and `ttl` (ms the
    mode has left; 'normal', '1', 0 once it lapsed) and notes the mode in `noted`, leaving in
    `before` the mode it replaces ('' when unchanged): read and note in one script, so two
    notes of one change cannot both see it."""
    return f"""
local mode = redis.call('HGET', {pace}, 'mode')
local share = redis.call('HGET', {pace}, 'share') or '1'
local ttl = redis.call('PTTL', {pace})
if not mode or mode == 'normal' or ttl <= 0 then
  mode = 'normal'
  share = '1'
  ttl = 0
end
local before = redis.call('GETSET', {noted}, mode) or 'normal'
if before == mode then before = '' end"""


# KEYS[4] the pace mode last noted; ARGV[3], ARGV[5] as for _FREE, ARGV[4] the slowed pace's
# step in ms, applied only while the account is slowed. The pacer's look, in one script: the
# pace now noted in KEYS[4] (as `throttle.Throttle.note`), then the budget as _FREE answers it.
# {free slots, ms until the oldest slot frees or the step ends, ms until ARGV[3] slots are
# free, slots in flight, mode, share, ms the mode has left, the mode it replaces ('' when
# unchanged)}.
_LOOK = (
    _PRELUDE
    + """
"""
    + note_pace("KEYS[3]", "KEYS[4]")
    + """
local step = 0
if mode == 'slowed' then step = tonumber(ARGV[4]) end
local gate = gated(step, ARGV[5])
local flying = in_flight()
if gate > 0 then return {0, gate, gate, flying, mode, share, ttl, before} end
local used = redis.call('ZCARD', KEYS[1])
if used < limit then return {limit - used, 0, 0, flying, mode, share, ttl, before} end
local want = tonumber(ARGV[3])
if want > limit then want = limit end
if want < 1 then want = 1 end
return {0, wait_for(0), wait_for(want - 1), flying, mode, share, ttl, before}
"""
)

# {slots in flight, 0}.
_IN_FLIGHT = _PRELUDE + "\nreturn {in_flight(), 0}\n"

# ARGV[3] member, ARGV[4..] the names a rebuild gives the same send (`attempt_member`): a slot
# Meta may have counted, scored with the time its answer came, under whichever name the set
# holds it. {1, slots still in flight}: the send's job learns in the same round trip whether
# its batch is over (`pacer.batch_settled`).
_STAMP = (
    _PRELUDE
    + """
local changed = 0
for i = 3, #ARGV do
  changed = changed + redis.call('ZADD', KEYS[1], 'XX', 'CH', now, ARGV[i])
end
if changed > 0 then redis.call('PEXPIRE', KEYS[1], window) end
return {1, in_flight()}
"""
)

# KEYS[1] the sorted set; ARGV[1] member, ARGV[2..] the names a rebuild gives the same send. A
# slot given back; answers the slots still in flight (as `_IN_FLIGHT` counts them). Never
# rebuilds: a lost budget has nothing to give back, and whoever takes a slot next rebuilds it.
_RELEASE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREM', KEYS[1], unpack(ARGV))
return redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf')
"""

# KEYS as above; ARGV[1] window ms, then member, age ms pairs. Once per loss of the set: a
# second rebuild (another worker's) finds the marker and adds nothing.
_REBUILD = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
local window = tonumber(ARGV[1])
local added = 0
for i = 2, #ARGV, 2 do
  local age = tonumber(ARGV[i + 1])
  if age < window then
    redis.call('ZADD', KEYS[1], now - age, ARGV[i])
    added = added + 1
  end
end
if added > 0 then redis.call('PEXPIRE', KEYS[1], window) end
redis.call('SET', KEYS[2], '1')
return added
"""

# (member, age in ms) of every slot the window still holds, read from the durable record; a
# negative age scores a slot in the future (a send still in flight).
History = Callable[[int, float], Awaitable[Sequence[tuple[str, int]]]]


async def _no_history(account_id: int, window_s: float) -> Sequence[tuple[str, int]]:
    return ()


def budget_key(account_id: int, budget: str = PRIVATE) -> str:
    """The account's sorted set of reservations, scored by Redis's clock in milliseconds."""
    return _KEY.format(budget=budget).format(account_id=account_id)


@dataclass(frozen=True, slots=True)
class Slot:
    """A reserved place in an account's hourly budget; release it if nothing was delivered."""

    account_id: int
    member: str


@dataclass(frozen=True, slots=True)
class BudgetFull:
    """No slot now; the next one frees after `wait_s` seconds."""

    wait_s: float


@dataclass(frozen=True, slots=True)
class Granted:
    """What `grant` took: the first `taken` members, and when the pacer should look again."""

    taken: int
    next_free_s: float  # until the oldest slot frees; 0 when slots are still free
    batch_free_s: float  # until the batch the pacer asked for is free; 0 likewise


@dataclass(frozen=True, slots=True)
class Look:
    """What the pacer's `look` read: the account's pace, noted, and the budget's slots."""

    mode: str
    share: float
    remaining_s: float  # until the mode lapses (0 when normal)
    previous: str | None  # the mode last noted, when this look changed it
    free: Availability


@dataclass(frozen=True, slots=True)
class Availability:
    free: int
    next_free_s: float  # 0 when `free` > 0
    batch_free_s: float  # until the batch asked for is free; 0 likewise
    in_flight: int = 0  # slots granted or sending whose sends are not answered yet
    # The account's pace (`throttle`: normal, slowed or paused), read in the same script.
    pace_mode: str = "normal"


def batch_size(limit: int) -> int:
    """How many free slots wake a pacer again: a fiftieth of the cap (15 of Meta's 750)."""
    return max(1, limit // 50)


def grant_stamp(granted_at: datetime) -> int:
    """A grant's time in whole microseconds, as PostgreSQL stores it: the grant's identity."""
    return (granted_at - _EPOCH) // _MICROSECOND


def grant_member(dm_log_id: int, granted_at: datetime | int) -> str:
    """The slot the pacer granted a row, named from the row alone (so a rebuild finds it);
    `granted_at` as the row holds it or as its `grant_stamp`."""
    stamp = granted_at if isinstance(granted_at, int) else grant_stamp(granted_at)
    return f"g:{dm_log_id}:{stamp}"


def attempt_member(attempt_id: int) -> str:
    """The name a rebuild gives the slot of a send recorded in `delivery_attempts`
    (`budget_history`): a send's job stamps or gives back its slot under this name too, since
    a rebuild while the send was in flight counted it as this, not as the job's own slot."""
    return f"a:{attempt_id}"


class BudgetUnavailableError(RedisError):
    """The budget could not be rebuilt (it kept vanishing); try again later."""


class HourlyBudget:
    def __init__(
        self,
        redis: Redis,
        *,
        limit: int,
        window_s: float = 3600.0,
        history: History = _no_history,
        in_flight_s: float = 0.0,
        budget: str = PRIVATE,
        grant_hold_s: float = 0.0,
        max_in_flight: int = 0,
    ) -> None:
        self._redis = redis
        self._key = _KEY.format(budget=budget)
        self._built = _BUILT.format(budget=budget)
        self.limit = limit
        self.window_s = window_s
        self.window_ms = int(window_s * 1000)
        self.in_flight_ms = int(in_flight_s * 1000)
        self.grant_hold_ms = int(grant_hold_s * 1000)
        self._history = history
        # The most slots in flight at once (0: no limit): `reserve` takes none while as many
        # are, and `grant` takes at most as many, only once none is (the batch before has
        # been sent), so one account's sends go out in the order they were granted, to within
        # one batch.
        self.max_in_flight = max_in_flight
        # Only the private replies follow the account's slowed pace; a pause stops both.
        self._slowed_refuses = "1" if budget == PRIVATE else "0"
        # While the account is slowed, each budget's pacer grants at most once a step: when
        # the next grant may be, in the pace's hash, one field per budget.
        self._gate_field = "next_grant" if budget == PRIVATE else f"next_{budget}_grant"
        # Registered when first run: a budget is made per delivery and runs two of its seven
        # scripts, and registering one hashes its whole text (~3 µs each).
        self._scripts: dict[str, AsyncScript] = {}

    def _script(self, source: str) -> AsyncScript:
        script = self._scripts.get(source)
        if script is None:
            script = self._scripts[source] = self._redis.register_script(source)
        return script

    async def reserve(self, account_id: int, *, tag: str = "") -> Slot | BudgetFull:
        member = f"{tag}:{uuid.uuid4().hex[:12]}" if tag else uuid.uuid4().hex
        granted, wait_ms = await self._run(
            self._script(_RESERVE),
            account_id,
            member,
            self.in_flight_ms,
            self._slowed_refuses,
            self.max_in_flight,
        )
        if int(granted) == 1:
            return Slot(account_id, member)
        return BudgetFull(int(wait_ms) / 1000.0)

    async def confirm(self, slot: Slot) -> Slot | BudgetFull:
        """A granted slot, just before its send: held again from now, or taken anew."""
        granted, wait_ms = await self._run(
            self._script(_CONFIRM), slot.account_id, slot.member, self.in_flight_ms
        )
        return slot if int(granted) == 1 else BudgetFull(int(wait_ms) / 1000.0)

    async def grant(
        self, account_id: int, members: Sequence[str], *, batch: int, step_s: float = 0.0
    ) -> Granted:
        """Slots for the pacer's rows; `step_s` > 0 while the account is slowed: then at most
        one grant per step, whoever kicks the pacer meanwhile."""
        if not members:
            return Granted(0, 0.0, 0.0)
        taken, next_ms, batch_ms = await self._run(
            self._script(_GRANT),
            account_id,
            batch,
            int(step_s * 1000),
            self.grant_hold_ms,
            self.max_in_flight,
            self._gate_field,
            *members,
        )
        return Granted(int(taken), int(next_ms) / 1000.0, int(batch_ms) / 1000.0)

    async def free(self, account_id: int, *, batch: int = 1, step_s: float = 0.0) -> Availability:
        free, next_ms, batch_ms, flying, mode = await self._run(
            self._script(_FREE), account_id, batch, int(step_s * 1000), self._gate_field
        )
        return Availability(
            int(free),
            int(next_ms) / 1000.0,
            int(batch_ms) / 1000.0,
            int(flying),
            _text(mode),
        )

    async def look(self, account_id: int, *, batch: int = 1, step_s: float = 0.0) -> Look:
        """The pacer's look in one script: the account's pace, noted as the one the pacer acts
        on (the mode it replaces when it changed, as `throttle.Throttle.note`), and the free
        slots as `free` counts them, the pace's step (`step_s`) applied only while slowed."""
        answer = await self._run(
            self._script(_LOOK),
            account_id,
            batch,
            int(step_s * 1000),
            self._gate_field,
            extra_keys=[PACE_SEEN_KEY.format(account_id=account_id)],
        )
        free, next_ms, batch_ms, flying, mode, share, ttl_ms, before = answer
        return Look(
            _text(mode),
            float(_text(share) or 1),
            int(ttl_ms) / 1000.0,
            _text(before) or None,
            Availability(
                int(free), int(next_ms) / 1000.0, int(batch_ms) / 1000.0, int(flying), _text(mode)
            ),
        )

    def grantable(self, free: Availability) -> int:
        """How many of the free slots one grant may take: a batch of `max_in_flight`, once
        none is in flight."""
        if self.max_in_flight <= 0:
            return free.free
        return min(free.free, self.max_in_flight) if free.in_flight == 0 else 0

    def reservable(self, free: Availability) -> int:
        """How many sends may take a slot of their own now (`reserve`)."""
        if self.max_in_flight <= 0:
            return free.free
        return max(0, min(free.free, self.max_in_flight - free.in_flight))

    async def in_flight(self, account_id: int) -> int:
        """Slots granted or sending, whose sends have not been answered yet."""
        flying, _ = await self._run(self._script(_IN_FLIGHT), account_id)
        return int(flying)

    async def stamp(self, slot: Slot, *, recorded_as: Sequence[str] = ()) -> int:
        """The send's answer came: the slot counts from now (Meta counted it by now), under
        its own name or, should the budget have been rebuilt while the send was in flight,
        under the names of the send's attempt rows (`recorded_as`, `attempt_member`): the
        caller has recorded the answer first, so a rebuild either read it or is rescored here.
        Returns the account's slots still in flight, as `in_flight` would."""
        _, flying = await self._run(
            self._script(_STAMP), slot.account_id, slot.member, *recorded_as
        )
        return int(flying)

    async def release(self, slot: Slot, *, recorded_as: Sequence[str] = ()) -> int:
        """The slot given back (nothing was delivered), under its own name and its send's
        attempt rows' (`recorded_as`, as `stamp`). Returns the account's slots still in
        flight, as `in_flight` would (0 when the budget was lost: nothing is counted then)."""
        key = self._key.format(account_id=slot.account_id)
        return int(await self._script(_RELEASE)(keys=[key], args=[slot.member, *recorded_as]))

    async def used(self, account_id: int) -> int:
        """Slots in the current window (for the dashboard and tests)."""
        key = self._key.format(account_id=account_id)
        seconds, micros = await self._redis.time()
        now_ms = int(seconds) * 1000 + int(micros) // 1000
        return int(await self._redis.zcount(key, now_ms - self.window_ms + 1, "+inf"))

    async def _run(
        self, script: Any, account_id: int, *args: object, extra_keys: Sequence[str] = ()
    ) -> list[Any]:
        keys = [
            self._key.format(account_id=account_id),
            self._built.format(account_id=account_id),
            PACE_KEY.format(account_id=account_id),
            *extra_keys,
        ]
        for _ in range(3):
            answer: list[Any] = await script(keys=keys, args=[self.limit, self.window_ms, *args])
            if int(answer[0]) != -1:
                return answer
            history = await self._history(account_id, self.window_s)
            pairs: list[str | int] = []
            for member, age_ms in history:
                pairs += [member, int(age_ms)]
            await self._script(_REBUILD)(keys=keys[:3], args=[self.window_ms, *pairs])
        raise BudgetUnavailableError(f"the budget of account {account_id} kept vanishing")


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
