"""Worker liveness in Redis: each worker beats every 30 s into a key that lives 120 s.

The worker writes, the web reads (the header badge and `/health`). A per-worker key plus an
index sorted by last beat lets the reader find every live worker without scanning Redis.
A clean shutdown deletes the worker's key at once; a killed worker's key simply expires.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from redis.asyncio import Redis

HEARTBEAT_INTERVAL_S = 30
HEARTBEAT_TTL_S = 120
# Two missed beats: the worker is probably wedged even though its key has not expired yet.
HEARTBEAT_STALE_S = 75

_KEY_PREFIX = "oncereply:worker:heartbeat:"
_INDEX = "oncereply:worker:heartbeats"

_WRITE = """
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[3] - ARGV[2])
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
    async with redis.pipeline(transaction=True) as pipe:
        pipe.delete(_KEY_PREFIX + worker_id)
        pipe.zrem(_INDEX, worker_id)
        await pipe.execute()


async def live_heartbeats(redis: Redis, now: float) -> list[Heartbeat]:
    """Workers whose heartbeat key still exists, freshest first."""
    worker_ids = await redis.zrevrangebyscore(_INDEX, "+inf", now - HEARTBEAT_TTL_S)
    if not worker_ids:
        return []
    raws = await redis.mget([_KEY_PREFIX + _text(worker_id) for worker_id in worker_ids])
    beats = [Heartbeat(**json.loads(raw)) for raw in raws if raw]
    return sorted(beats, key=lambda beat: beat.beat_at, reverse=True)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
