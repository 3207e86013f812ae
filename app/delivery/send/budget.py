"""The hourly private-reply budget of each account, as one atomic Redis script.

Meta allows 750 private replies per hour per account. Each reservation is a member of a sorted
set scored by its time; a reservation succeeds while fewer than `limit` members are younger
than the window, otherwise the script answers when the oldest one ages out. Time comes from the
Redis server, so workers on different hosts agree on it. A definite rejection gives its slot
back (`release`); an ambiguous one keeps it, since Meta may have counted the message.

Redis being down makes `reserve` raise: the caller then waits and tries later, it never sends
without a slot.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from redis.asyncio import Redis

_KEY = "oncereply:pr-budget:{account_id}"

# KEYS[1] budget key; ARGV: limit, window ms, member. Returns {1, member} or {0, wait ms}.
_RESERVE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if redis.call('ZCARD', KEYS[1]) < limit then
  redis.call('ZADD', KEYS[1], now, ARGV[3])
  redis.call('PEXPIRE', KEYS[1], window)
  return {1, 0}
end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local wait = tonumber(oldest[2]) + window - now
if wait < 1 then wait = 1 end
return {0, wait}
"""


@dataclass(frozen=True, slots=True)
class Slot:
    """A reserved place in an account's hourly budget; release it if nothing was delivered."""

    account_id: int
    member: str


@dataclass(frozen=True, slots=True)
class BudgetFull:
    """No slot now; the next one frees after `wait_s` seconds."""

    wait_s: float


class HourlyBudget:
    def __init__(self, redis: Redis, *, limit: int, window_s: float = 3600.0) -> None:
        self._redis = redis
        self.limit = limit
        self.window_ms = int(window_s * 1000)
        self._reserve = redis.register_script(_RESERVE)

    async def reserve(self, account_id: int, *, tag: str = "") -> Slot | BudgetFull:
        member = f"{tag}:{uuid.uuid4().hex[:12]}" if tag else uuid.uuid4().hex
        granted, wait_ms = await self._reserve(
            keys=[_KEY.format(account_id=account_id)], args=[self.limit, self.window_ms, member]
        )
        if int(granted) == 1:
            return Slot(account_id, member)
        return BudgetFull(int(wait_ms) / 1000.0)

    async def release(self, slot: Slot) -> None:
        await self._redis.zrem(_KEY.format(account_id=slot.account_id), slot.member)

    async def used(self, account_id: int) -> int:
        """Reservations in the current window (for the dashboard and tests)."""
        key = _KEY.format(account_id=account_id)
        seconds, micros = await self._redis.time()
        now_ms = int(seconds) * 1000 + int(micros) // 1000
        return int(await self._redis.zcount(key, now_ms - self.window_ms + 1, "+inf"))
