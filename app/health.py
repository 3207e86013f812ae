"""Health of the whole system as the web process sees it: database, Redis, queue, workers.

One function gathers it for `/health` (JSON, 200 or 503) and for the header badge
(healthy / stale / down). Each probe has a short deadline so a dead dependency makes the
answer "down" quickly instead of hanging the page.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from sqlalchemy import text

from app.heartbeat import HEARTBEAT_STALE_S, HEARTBEAT_TTL_S, live_heartbeats
from app.resources import Resources

_PROBE_TIMEOUT_S = 2.0
# A backlog this deep with nothing running means no worker is draining the queue, even if a
# heartbeat still looks fresh (a stuck worker can beat while its job loop is wedged).
STUCK_QUEUE_DEPTH = 25

Badge = Literal["healthy", "stale", "down"]


@dataclass(slots=True)
class HealthReport:
    database: dict[str, Any] = field(default_factory=dict)
    redis: dict[str, Any] = field(default_factory=dict)
    queue: dict[str, Any] = field(default_factory=dict)
    worker: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(part.get("ok") for part in (self.database, self.redis, self.queue, self.worker))

    @property
    def badge(self) -> Badge:
        if not (self.database.get("ok") and self.redis.get("ok") and self.worker.get("ok")):
            return "down"
        if self.worker.get("stale") or not self.queue.get("ok"):
            return "stale"
        return "healthy"

    @property
    def queue_depth(self) -> int | None:
        depth = self.queue.get("queued")
        return depth if isinstance(depth, int) else None

    def as_json(self) -> dict[str, Any]:
        return {
            "status": "ok" if self.ok else "degraded",
            "badge": self.badge,
            "checks": {
                "database": self.database,
                "redis": self.redis,
                "queue": self.queue,
                "worker": self.worker,
            },
        }


async def check_health(resources: Resources) -> HealthReport:
    database, redis_check, queue_check, worker_check = await asyncio.gather(
        _probe(_database(resources)),
        _probe(_redis(resources)),
        _probe(_queue(resources)),
        _probe(_workers(resources)),
    )
    return HealthReport(
        database=database, redis=redis_check, queue=queue_check, worker=worker_check
    )


async def _probe(check: Any) -> dict[str, Any]:
    started = time.perf_counter()
    try:
        async with asyncio.timeout(_PROBE_TIMEOUT_S):
            result: dict[str, Any] = await check
    except TimeoutError:
        result = {"ok": False, "error": f"no answer within {_PROBE_TIMEOUT_S:g} s"}
    except Exception as exc:  # noqa: BLE001 - any failure of a dependency is a health result
        result = {"ok": False, "error": type(exc).__name__}
    result["latency_ms"] = round((time.perf_counter() - started) * 1000, 1)
    return result


async def _database(resources: Resources) -> dict[str, Any]:
    async with resources.engine.connect() as connection:
        await connection.execute(text("SELECT 1"))
    return {"ok": True}


async def _redis(resources: Resources) -> dict[str, Any]:
    # redis-py types ping() as `Awaitable[bool] | bool` across its sync and async clients.
    await resources.redis.ping()  # type: ignore[misc]
    return {"ok": True}


async def _queue(resources: Resources) -> dict[str, Any]:
    """The queue's depth over every lane, and each lane's; stuck when any lane is."""
    lanes: dict[str, dict[str, int]] = {}
    stuck = False
    for queue in resources.queue.lanes:
        queued = await queue.count("queued")
        active = await queue.count("active")
        incomplete = await queue.count("incomplete")
        lanes[queue.lane.value] = {
            "queued": queued,
            "active": active,
            "scheduled": max(0, incomplete - queued - active),
        }
        stuck = stuck or (queued >= STUCK_QUEUE_DEPTH and active == 0)
    return {
        "ok": not stuck,
        "name": resources.queue.name,
        **{part: sum(lane[part] for lane in lanes.values()) for part in _QUEUE_PARTS},
        "lanes": lanes,
        **({"error": "jobs are waiting and none is running"} if stuck else {}),
    }


_QUEUE_PARTS = ("queued", "active", "scheduled")


async def _workers(resources: Resources) -> dict[str, Any]:
    now = time.time()
    beats = await live_heartbeats(resources.redis, now)
    if not beats:
        return {
            "ok": False,
            "error": f"no worker heartbeat in the last {HEARTBEAT_TTL_S} s",
            "workers": 0,
        }
    freshest = beats[0]
    age = round(freshest.age(now), 1)
    return {
        "ok": True,
        "stale": age > HEARTBEAT_STALE_S,
        "workers": len(beats),
        "heartbeat_age_s": age,
        "jobs_done": sum(beat.jobs_done for beat in beats),
        "worker_ids": [beat.worker_id for beat in beats],
    }
