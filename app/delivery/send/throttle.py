"""Adaptive throttling of an account's sends, from what Meta's answers say.

Every answer to a send carries Meta's usage headers (`X-App-Usage`,
`X-Business-Use-Case-Usage`: percentages of the budgets, and `estimated_time_to_regain_access`
once one is spent), and a refusal for a rate limit has its code (4, 17, 32, 613, 80002).
`observe` reads them after each call and moves the account's pace, one atomic Redis script:

- **slowed**: usage at or above `SLOW_FROM` percent, or a rate-limit code with no stated
  wait: the pacer hands out only a share of its usual rate (`share`: the less headroom, the
  smaller; the least after a refusal), so the account slows down before Meta refuses. It
  holds for `slow_hold_s` after the last answer that said so (at least `REFUSAL_HOLD_MIN_S`
  after a refusal), then lapses. Meanwhile no job takes a slot of its own: every send goes
  through the pacer, one grant per step of the slowed pace (`budget`);
- **paused**: a rate-limit code with `estimated_time_to_regain_access`: no slot at all is
  taken (the budget's scripts refuse, `budget.PACE_KEY`) until that time has passed, then the
  pause lapses on its own;
- **normal**: neither (the key is absent).

A change wakes the account's pacer at once and again when it lapses; each change is recorded
once as an operational event by whoever notes it first (`note`: slowed, paused, back to
normal; the send that saw it, or the pacer), and the pacer paces accordingly. Times come from
the Redis server.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis

from app.delivery.send.budget import PACE_KEY, PACE_SEEN_KEY, note_pace
from app.instagram.classify import PACE_LIMIT_CODES
from app.instagram.graph import Usage

_KEY = PACE_KEY
_SEEN = PACE_SEEN_KEY

SLOW_FROM = 75.0
# A refusal with no stated wait keeps the account slowed at least this long, whatever the
# budget's window: Meta's own limits do not shrink with a window a benchmark compresses, and a
# refused send gives its slot back, so a pace back to normal a second later refuses again.
REFUSAL_HOLD_MIN_S = 30.0
MIN_SHARE = 0.1
_MEASURES = ("call_count", "total_time", "total_cputime")
RATE_LIMIT_CODES = PACE_LIMIT_CODES
NORMAL, SLOWED, PAUSED = "normal", "slowed", "paused"

# KEYS[1] the pace hash; ARGV: mode (slowed|paused), share, hold ms. A pause only ever
# lengthens; a slow-down never shortens a pause. Returns {mode before, mode after}.
_OBSERVE = """
local before = redis.call('HGET', KEYS[1], 'mode') or 'normal'
local hold = tonumber(ARGV[3])
if ARGV[1] == 'paused' then
  if before ~= 'paused' or redis.call('PTTL', KEYS[1]) < hold then
    redis.call('HSET', KEYS[1], 'mode', 'paused', 'share', '0')
    redis.call('PEXPIRE', KEYS[1], hold)
  end
  return {before, 'paused'}
end
if before == 'paused' then return {before, before} end
redis.call('HSET', KEYS[1], 'mode', 'slowed', 'share', ARGV[2])
redis.call('PEXPIRE', KEYS[1], hold)
return {before, 'slowed'}
"""


# KEYS[1] the pace hash, KEYS[2] the mode last noted. The pace now ({mode, share, ms left}, as
# `current` reads it) and the mode it replaces in KEYS[2] ('' when unchanged): one read and
# one note in one script, so two notes of one change cannot both see it.
_NOTE = note_pace("KEYS[1]", "KEYS[2]") + "\nreturn {mode, share, ttl, before}\n"


@dataclass(frozen=True, slots=True)
class Pace:
    mode: str
    share: float  # of the free slots the pacer may hand out
    remaining_s: float  # until the mode lapses (0 when normal)


@dataclass(frozen=True, slots=True)
class Observed:
    before: str
    after: str

    hold_s: float = 0.0

    @property
    def changed(self) -> bool:
        return self.before != self.after


def usage_percent(usage: Usage) -> float:
    """The highest share of any budget the headers report, in percent."""
    budgets: list[dict[str, Any]] = [usage.app]
    for entries in usage.business.values():
        budgets += (
            [entry for entry in entries if isinstance(entry, dict)]
            if isinstance(entries, list)
            else []
        )
    return max((_number(budget.get(name)) for budget in budgets for name in _MEASURES), default=0.0)


def share_for(percent: float) -> float:
    """The share of free slots to hand out at this usage: all below SLOW_FROM, down to
    MIN_SHARE at 100 %."""
    if percent < SLOW_FROM:
        return 1.0
    return max(MIN_SHARE, (100.0 - percent) / (100.0 - SLOW_FROM))


def slow_hold_s(window_s: float) -> float:
    """How long one high-usage answer keeps the account slowed: five minutes of the hour."""
    return max(1.0, window_s / 12.0)


class Throttle:
    def __init__(self, redis: Redis, *, window_s: float) -> None:
        self._redis = redis
        self.window_s = window_s

    async def observe(
        self, account_id: int, usage: Usage, *, code: int | None = None
    ) -> Observed | None:
        """What one answer says about the account's pace; None when it says nothing new
        (usage below SLOW_FROM and no rate-limit code: no Redis call)."""
        if code in RATE_LIMIT_CODES:
            minutes = usage.regain_access_minutes
            if minutes:
                return await self._set(account_id, PAUSED, 0.0, minutes * 60.0)
            hold_s = max(slow_hold_s(self.window_s), REFUSAL_HOLD_MIN_S)
            return await self._set(account_id, SLOWED, MIN_SHARE, hold_s)
        percent = usage_percent(usage)
        if percent < SLOW_FROM:
            return None
        return await self._set(account_id, SLOWED, share_for(percent), slow_hold_s(self.window_s))

    async def current(self, account_id: int) -> Pace:
        key = _KEY.format(account_id=account_id)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hgetall(key)
            pipe.pttl(key)
            fields, ttl_ms = await pipe.execute()
        values = {_text(k): _text(v) for k, v in (fields or {}).items()}
        mode = values.get("mode", NORMAL)
        if mode == NORMAL or int(ttl_ms) <= 0:
            return Pace(NORMAL, 1.0, 0.0)
        return Pace(mode, float(values.get("share", "1") or 1), int(ttl_ms) / 1000.0)

    async def note(self, account_id: int) -> tuple[Pace, str | None]:
        """The pace now (`current`), remembered as the one the pacer acts on, in one round
        trip; with the mode it replaces when it changed (whoever notes a change first)."""
        mode, share, ttl_ms, before = await self._redis.register_script(_NOTE)(
            keys=[_KEY.format(account_id=account_id), _SEEN.format(account_id=account_id)]
        )
        mode = _text(mode)
        previous = _text(before) or None
        if mode == NORMAL:
            return Pace(NORMAL, 1.0, 0.0), previous
        return Pace(mode, float(_text(share) or 1), int(ttl_ms) / 1000.0), previous

    async def _set(self, account_id: int, mode: str, share: float, hold_s: float) -> Observed:
        # Registered here, not per Throttle: most answers say nothing and run no script.
        answer: list[Any] = await self._redis.register_script(_OBSERVE)(
            keys=[_KEY.format(account_id=account_id)],
            args=[mode, f"{share:.3f}", max(1, int(hold_s * 1000))],
        )
        return Observed(_text(answer[0]), _text(answer[1]), hold_s)


def _number(value: object) -> float:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return 0.0


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
