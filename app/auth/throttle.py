"""Login throttling: repeated failures are slowed down, then refused for a while.

Every attempt is counted *before* the password is checked, in one atomic Redis script, and a
success clears the count for that email. Counting first means a burst of parallel guesses
cannot all slip in before the first failure is recorded.

Per email (the account under attack): past `free_failures` an attempt waits `base_delay_s`,
doubling up to `max_delay_s`, from wherever it comes. Per email *and* client address: past
`lock_after` failures that address is refused for that email for `lock_s`, then it starts
again with a fresh count. The lock is never on the email alone: anyone could then lock any
creator out, forever, with eight requests every fifteen minutes; an attacker spread over
many addresses only ever waits `max_delay_s` per guess, and the owner, from their own
address, waits at most that long too. Per client address (one source spraying many emails)
the count only slows attempts down, past `address_free_failures`: behind a reverse proxy many
people can share one address, and a lock there would let anyone lock everyone out.

Failed passwords are also counted per email for a day (`recent_failures`), so the overview
can tell the owner their sign-in is being attacked.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from redis.asyncio import Redis
from redis.exceptions import RedisError

_PREFIX = "oncereply:login"

# KEYS: email counter, email+address lock, address counter, email+address counter
# ARGV: window seconds, lock seconds, email+address limit
# Returns {locked (0/1), email count, address count, seconds until the lock ends}.
_ATTEMPT_SCRIPT = """
local ttl = redis.call('TTL', KEYS[2])
if ttl > 0 then return {1, 0, 0, ttl} end
local email_count = redis.call('INCR', KEYS[1])
if email_count == 1 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
local address_count = redis.call('INCR', KEYS[3])
if address_count == 1 then redis.call('EXPIRE', KEYS[3], ARGV[1]) end
local pair_count = redis.call('INCR', KEYS[4])
if pair_count == 1 then redis.call('EXPIRE', KEYS[4], ARGV[1]) end
if pair_count > tonumber(ARGV[3]) then
  redis.call('SET', KEYS[2], '1', 'EX', ARGV[2])
  redis.call('DEL', KEYS[4])
  return {1, email_count, address_count, tonumber(ARGV[2])}
end
return {0, email_count, address_count, 0}
"""

# KEYS: email counter, address counter, email+address counter. A success forgets the email's
# counts and takes its own attempt back off the address's count (which keeps its expiry), so
# the address counts failures.
_SUCCESS_SCRIPT = """
redis.call('DEL', KEYS[1], KEYS[3])
local seen = tonumber(redis.call('GET', KEYS[2]) or '0')
if seen > 0 then redis.call('DECR', KEYS[2]) end
return 0
"""

# KEYS: the email's failures of the last day. ARGV: seconds to keep them.
_FAILED_SCRIPT = """
local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
return count
"""
RECENT_FAILURES_S = 24 * 3600


@dataclass(frozen=True, slots=True)
class ThrottlePolicy:
    free_failures: int = 3
    lock_after: int = 8
    address_free_failures: int = 20
    window_s: int = 15 * 60
    lock_s: int = 15 * 60
    base_delay_s: float = 0.25
    max_delay_s: float = 2.0

    def delay_for(self, attempt: int, *, free: int | None = None) -> float:
        """Seconds to hold the `attempt`-th attempt in the window before checking it."""
        free = self.free_failures if free is None else free
        if attempt <= free:
            return 0.0
        delay = self.base_delay_s * 2.0 ** (attempt - free - 1)
        return min(delay, self.max_delay_s)


@dataclass(frozen=True, slots=True)
class AttemptDecision:
    allowed: bool
    delay_s: float
    retry_after_s: int

    @property
    def retry_after_text(self) -> str:
        minutes = -(-self.retry_after_s // 60)
        return f"{minutes} minute{'s' if minutes != 1 else ''}"


def _digest(value: str) -> str:
    # Keys hold a hash, so Redis never lists the emails people tried.
    return hashlib.sha256(value.encode()).hexdigest()[:32]


class LoginThrottle:
    def __init__(self, redis: Redis, policy: ThrottlePolicy | None = None) -> None:
        self._redis = redis
        self.policy = policy or ThrottlePolicy()

    def _keys(self, email: str, address: str) -> list[str]:
        email_id, address_id = _digest(email), _digest(address)
        return [
            f"{_PREFIX}:fail:email:{email_id}",
            f"{_PREFIX}:lock:pair:{email_id}:{address_id}",
            f"{_PREFIX}:fail:addr:{address_id}",
            f"{_PREFIX}:fail:pair:{email_id}:{address_id}",
        ]

    async def attempt(self, email: str, address: str) -> AttemptDecision:
        """Count an attempt and say whether it may proceed and how long it must wait first."""
        policy = self.policy
        locked, email_count, address_count, ttl = await self._redis.eval(  # type: ignore[misc]
            _ATTEMPT_SCRIPT,
            4,
            *self._keys(email, address),
            policy.window_s,
            policy.lock_s,
            policy.lock_after,
        )
        if int(locked):
            return AttemptDecision(allowed=False, delay_s=0.0, retry_after_s=int(ttl))
        delay = max(
            policy.delay_for(int(email_count)),
            policy.delay_for(int(address_count), free=policy.address_free_failures),
        )
        return AttemptDecision(allowed=True, delay_s=delay, retry_after_s=0)

    async def succeeded(self, email: str, address: str) -> None:
        """A correct password clears the email's count; the address keeps its failures, so one
        valid account cannot reset a guesser's budget between guesses."""
        email_key, _, address_key, pair_key = self._keys(email, address)
        await self._redis.eval(_SUCCESS_SCRIPT, 3, email_key, address_key, pair_key)  # type: ignore[misc]

    async def failed(self, email: str) -> None:
        """A wrong password for `email`, remembered for a day for the owner's overview."""
        key = f"{_PREFIX}:recent:email:{_digest(email)}"
        await self._redis.eval(_FAILED_SCRIPT, 1, key, RECENT_FAILURES_S)  # type: ignore[misc]

    async def recent_failures(self, email: str) -> int:
        """Wrong passwords tried for `email` in the last day (0 when Redis does not answer)."""
        try:
            count = await self._redis.get(f"{_PREFIX}:recent:email:{_digest(email)}")
        except RedisError:
            return 0
        return int(count or 0)


# KEYS: email counter, address counter. ARGV: window seconds.
# Returns {email count, address count, seconds left in each one's window}.
_SIGNUP_SCRIPT = """
local email_count = redis.call('INCR', KEYS[1])
if email_count == 1 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
local address_count = redis.call('INCR', KEYS[2])
if address_count == 1 then redis.call('EXPIRE', KEYS[2], ARGV[1]) end
return {email_count, address_count, redis.call('TTL', KEYS[1]), redis.call('TTL', KEYS[2])}
"""


@dataclass(frozen=True, slots=True)
class SignupPolicy:
    per_email: int = 5
    per_address: int = 10
    window_s: int = 15 * 60


class SignupThrottle:
    """Sign-ups (and invite sign-ups) per email and per client address, counted before the
    password is hashed: each costs half a second of CPU, and an existing email costs the same
    as a new one. A sign-up past either limit is refused until its window ends."""

    def __init__(self, redis: Redis, policy: SignupPolicy | None = None) -> None:
        self._redis = redis
        self.policy = policy or SignupPolicy()

    async def attempt(self, email: str, address: str) -> AttemptDecision:
        policy = self.policy
        email_count, address_count, email_ttl, address_ttl = await self._redis.eval(  # type: ignore[misc]
            _SIGNUP_SCRIPT,
            2,
            f"{_PREFIX}:signup:email:{_digest(email)}",
            f"{_PREFIX}:signup:addr:{_digest(address)}",
            policy.window_s,
        )
        waits = [
            int(ttl)
            for count, limit, ttl in (
                (email_count, policy.per_email, email_ttl),
                (address_count, policy.per_address, address_ttl),
            )
            if int(count) > limit
        ]
        if waits:
            return AttemptDecision(allowed=False, delay_s=0.0, retry_after_s=max(*waits, 1))
        return AttemptDecision(allowed=True, delay_s=0.0, retry_after_s=0)
