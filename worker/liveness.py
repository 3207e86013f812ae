"""Taking over the jobs of a dead worker: every live worker looks every few seconds.

A worker SIGKILLed (or frozen past its heartbeat's lifetime) leaves the jobs it had taken in
SAQ's active list. SAQ's own sweep would find them only past their timeout (70 s for a delivery)
plus up to a minute, and then abort a job that has no retries left instead of running it; it
also aborted jobs live workers had just taken, so the queue's sweep no longer touches a held job
(`app.queue.saq_adapter.LeanRedisQueue`). Here each live worker, every `HEARTBEAT_INTERVAL_S`,
reads the held jobs and puts back at the front of the queue those whose worker is gone: neither
beating nor draining, and its beat missing for a full key lifetime (`app/heartbeat.py`
`workers_gone`: right after a Redis restart, which loses every heartbeat key, a live worker is
not taken for dead before it has had a key lifetime to beat again). So they run again within the
heartbeat's lifetime plus one look.

Running a job again is safe because every job is idempotent by its own statements: a
delivery's claim decides in PostgreSQL whether anything is sent (docs/architecture.md#queue).

A job taken from the queue carries no worker id until its taker marks it active, a moment
later; one that stays unmarked for `UNMARKED_GRACE_S` (its taker died in between) is put
back too. The requeue compares the stored job first, so two workers looking at once, or a
job finishing meanwhile, cannot make it run twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from redis.asyncio import Redis
from saq import Queue

from app.heartbeat import HEARTBEAT_INTERVAL_S, HEARTBEAT_TTL_S, workers_gone
from app.queue.saq_adapter import held_jobs, requeue_held

logger = logging.getLogger("oncereply.worker.liveness")

UNMARKED_GRACE_S = 10.0
_HELD_STATES = frozenset({"active", "aborting"})


@dataclass(slots=True)
class OrphanWatch:
    """What one worker remembers between looks: unmarked jobs and when it first saw each."""

    unmarked_since: dict[str, tuple[bytes, float]] = field(default_factory=dict)
    requeued: int = 0
    # How long a worker Redis has no record of must be missing before its jobs are taken.
    missing_grace_s: float = HEARTBEAT_TTL_S

    async def look(self, queue: Queue, redis: Redis, now: float | None = None) -> list[str]:
        """Requeue the jobs no live worker holds; returns their keys."""
        moment = time.monotonic() if now is None else now
        held = await held_jobs(queue)
        owners = {job.worker_id for job in held if job.worker_id and job.status in _HELD_STATES}
        gone = await workers_gone(redis, owners, grace_s=self.missing_grace_s)
        unmarked: dict[str, tuple[bytes, float]] = {}
        taken_over: list[str] = []
        for job in held:
            if job.status in _HELD_STATES:
                if job.worker_id and job.worker_id not in gone:
                    continue
                reason = f"taken over: worker {job.worker_id} stopped beating"
            else:
                seen = self.unmarked_since.get(job.job_id)
                first = seen[1] if seen is not None and seen[0] == job.payload else moment
                unmarked[job.job_id] = (job.payload, first)
                if moment - first < UNMARKED_GRACE_S:
                    continue
                reason = "taken over: its worker died before starting it"
            if await requeue_held(queue, job, reason):
                taken_over.append(job.key)
                unmarked.pop(job.job_id, None)
                logger.warning("requeued job %s (%s)", job.key, reason)
        self.unmarked_since = unmarked
        self.requeued += len(taken_over)
        return taken_over


async def watch_for_orphans(queues: Sequence[Queue], redis: Redis, stopping: asyncio.Event) -> None:
    """Look at once (a restarted worker takes over its predecessor's jobs), then every beat,
    in every lane's queue."""
    watches = [(queue, OrphanWatch()) for queue in queues]
    while not stopping.is_set():
        for queue, watch in watches:
            try:
                await watch.look(queue, redis)
            except Exception:  # Redis may be restarting; the next look will do
                logger.warning("could not look for jobs of dead workers", exc_info=True)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stopping.wait(), timeout=HEARTBEAT_INTERVAL_S)
