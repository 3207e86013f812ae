"""Worker liveness in Redis: each worker beats every 4 s into a key that lives 16 s.

The worker writes, the web reads (the header badge and `/health`), and the other workers read
it to take over the jobs of one that died (`worker/liveness.py`). A per-worker key plus an
index sorted by last beat lets the reader find every live worker without scanning Redis.
A killed worker's key simply expires, so "no worker" shows within 16 s of a SIGKILL.

A worker that is stopping (SIGTERM) withdraws its heartbeat at once, since it takes no new
job, but leaves a short-lived "draining" key while its running jobs finish: those jobs are
still held by a live process and must not be taken over. Its clean exit deletes both.

The key lives four beats: a busy machine may delay a beat or two without the worker being
declared dead and its jobs run a second time.

A missing key proves a worker dead only if this Redis saw it beat: after a Redis restart
(all keys lost) every live worker looks dead until its next beat. So each beat also leaves a
long-lived "known" key; a worker whose beat is missing and that Redis does not know is given
a grace of one key lifetime, counted by a "missing since" key the first reader sets
(`workers_gone`). A further Redis restart loses that key too and starts the grace again.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields

from redis.asyncio import Redis

logger = logging.getLogger(__name__)

HEARTBEAT_INTERVAL_S = 4
HEARTBEAT_TTL_S = 16
# Two missed beats: the worker is probably wedged even though its key has not expired yet.
HEARTBEAT_STALE_S = 10

_KEY_PREFIX = "oncereply:worker:heartbeat:"
_DRAINING_PREFIX = "oncereply:worker:draining:"
_KNOWN_PREFIX = "oncereply:worker:known:"
_MISSING_PREFIX = "oncereply:worker:missing:"
_INDEX = "oncereply:worker:heartbeats"
# Long enough to outlive any absence worth telling apart from a Redis restart.
KNOWN_TTL_S = 3600

_WRITE = """
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[3] - 2 * ARGV[2])
redis.call('SET', KEYS[3], '1', 'EX', ARGV[5])
redis.call('DEL', KEYS[4])
return 1
"""

# Per worker: beating or draining → not gone; known to this Redis → gone (its key expired a
# full lifetime after its last beat); else gone once missing for ARGV[1] seconds by Redis's
# own clock, from the first look that found it missing (SET NX).
_GONE = """
if redis.call('EXISTS', KEYS[1], KEYS[2]) > 0 then return 0 end
if redis.call('EXISTS', KEYS[3]) == 1 then return 1 end
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
redis.call('SET', KEYS[4], string.format('%.6f', now), 'NX', 'EX', ARGV[2])
if now - tonumber(redis.call('GET', KEYS[4])) >= tonumber(ARGV[1]) then return 1 end
return 0
"""


@dataclass(frozen=True, slots=True)
class Heartbeat:
    worker_id: str
    pid: int
    host: str
    version: str
    started_at: float
    beat_at: float
    jobs_done: int
    last_error: str | None

    def age(self, now: float) -> float:
        return max(0.0, now - self.beat_at)


_FIELDS = frozenset(field.name for field in fields(Heartbeat))


def parse_heartbeat(raw: bytes | str) -> Heartbeat | None:
    """One stored beat, or None (logged) when it cannot be read.

    Keys this reader does not know are ignored: in a rolling deploy a newer worker may write
    fields an older web process has never heard of, and that must not turn `/health` into a
    503. A beat that lacks a field or is not JSON is skipped rather than failing every reader.
    """
    try:
        data = json.loads(raw)
        return Heartbeat(**{key: value for key, value in data.items() if key in _FIELDS})
    except (ValueError, TypeError, AttributeError):
        logger.warning("ignoring an unreadable worker heartbeat: %.200r", raw)
        return None


async def write_heartbeat(redis: Redis, beat: Heartbeat) -> None:
    """Record one beat atomically: the worker's key, its place in the index, and that this
    Redis knows it (no longer missing)."""
    await redis.eval(  # type: ignore[misc]
        _WRITE,
        4,
        _KEY_PREFIX + beat.worker_id,
        _INDEX,
        _KNOWN_PREFIX + beat.worker_id,
        _MISSING_PREFIX + beat.worker_id,
        json.dumps(asdict(beat)),
        HEARTBEAT_TTL_S,
        beat.beat_at,
        beat.worker_id,
        KNOWN_TTL_S,
    )


async def clear_heartbeat(redis: Redis, worker_id: str) -> None:
    """The worker has exited cleanly: it is neither live nor draining any more."""
    async with redis.pipeline(transaction=True) as pipe:
        pipe.delete(_KEY_PREFIX + worker_id, _DRAINING_PREFIX + worker_id)
        pipe.zrem(_INDEX, worker_id)
        await pipe.execute()


async def withdraw_heartbeat(redis: Redis, worker_id: str, draining_s: float) -> None:
    """The worker takes no new job: off the dashboard now, but its running jobs stay its own
    for `draining_s` (or until `clear_heartbeat`)."""
    async with redis.pipeline(transaction=True) as pipe:
        pipe.set(_DRAINING_PREFIX + worker_id, b"1", ex=max(1, round(draining_s)))
        pipe.delete(_KEY_PREFIX + worker_id)
        pipe.zrem(_INDEX, worker_id)
        await pipe.execute()


async def workers_gone(
    redis: Redis, worker_ids: Iterable[str], *, grace_s: float = HEARTBEAT_TTL_S
) -> set[str]:
    """Those of `worker_ids` whose jobs may be taken over: neither beating nor draining, and
    either known to this Redis (so the beat has been missing a full key lifetime) or found
    missing for at least `grace_s` (a Redis restart lost what it knew)."""
    ids = sorted(set(worker_ids))
    if not ids:
        return set()
    async with redis.pipeline(transaction=False) as pipe:
        for worker_id in ids:
            pipe.eval(
                _GONE,
                4,
                _KEY_PREFIX + worker_id,
                _DRAINING_PREFIX + worker_id,
                _KNOWN_PREFIX + worker_id,
                _MISSING_PREFIX + worker_id,
                grace_s,
                max(1, round(2 * grace_s)),
            )
        found = await pipe.execute()
    return {worker_id for worker_id, gone in zip(ids, found, strict=True) if gone}


async def live_heartbeats(redis: Redis, now: float) -> list[Heartbeat]:
    """Workers whose heartbeat key still exists, freshest first.

    The key's own expiry decides; the index's bound only keeps the read short (a beat's clock
    may lag Redis's a little, so it is twice the key's lifetime)."""
    worker_ids = await redis.zrevrangebyscore(_INDEX, "+inf", now - 2 * HEARTBEAT_TTL_S)
    if not worker_ids:
        return []
    raws = await redis.mget([_KEY_PREFIX + _text(worker_id) for worker_id in worker_ids])
    beats = [beat for raw in raws if raw and (beat := parse_heartbeat(raw)) is not None]
    return sorted(beats, key=lambda beat: beat.beat_at, reverse=True)


async def host_heartbeat(redis: Redis, host: str, now: float) -> Heartbeat | None:
    """The freshest live beat written from `host`: in a container, that container's worker."""
    return next((beat for beat in await live_heartbeats(redis, now) if beat.host == host), None)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
