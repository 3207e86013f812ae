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
_INDEX = "oncereply:worker:heartbeats"

_WRITE = """
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[3] - 2 * ARGV[2])
return 1
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
    """Record one beat atomically: the worker's key, and its place in the index."""
    await redis.eval(  # type: ignore[misc]
        _WRITE,
        2,
        _KEY_PREFIX + beat.worker_id,
        _INDEX,
        json.dumps(asdict(beat)),
        HEARTBEAT_TTL_S,
        beat.beat_at,
        beat.worker_id,
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


async def workers_alive(redis: Redis, worker_ids: Iterable[str]) -> set[str]:
    """Those of `worker_ids` that are beating or draining: their jobs are being run."""
    ids = sorted(set(worker_ids))
    if not ids:
        return set()
    async with redis.pipeline(transaction=False) as pipe:
        for worker_id in ids:
            pipe.exists(_KEY_PREFIX + worker_id, _DRAINING_PREFIX + worker_id)
        found = await pipe.execute()
    return {worker_id for worker_id, count in zip(ids, found, strict=True) if count}


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
