"""Which held jobs a live worker takes over, on a real Redis: a job whose worker beats or is
draining stays; one whose worker is gone goes back to the front of the queue at once; one
taken but never marked active (its taker died in between) only after a grace period; after a
Redis restart, a worker Redis no longer knows only once it has been missing for the grace."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
from saq import Job, Status
from saq.queue.redis import RedisQueue

from app.heartbeat import Heartbeat, clear_heartbeat, withdraw_heartbeat, write_heartbeat
from app.queue import saq_adapter
from app.resources import Resources
from app.settings import Settings
from worker.liveness import UNMARKED_GRACE_S, OrphanWatch


@pytest.fixture
async def queue(settings: Settings) -> AsyncIterator[RedisQueue]:
    opened = RedisQueue.from_url(settings.redis_url, name="orphan-watch")
    await opened.connect()
    try:
        yield opened
    finally:
        await opened.disconnect()


async def _taken_by(queue: RedisQueue, key: str, worker_id: str) -> Job:
    """A job dequeued and marked active by `worker_id`, as SAQ's worker does."""
    await queue.enqueue("work", key=key)
    job = await queue.dequeue(timeout=1)
    assert job is not None
    assert job.key == key
    job.worker_id, job.attempts, job.started = worker_id, 1, int(time.time() * 1000)
    await job.update(status=Status.ACTIVE)
    return job


async def _beat(resources: Resources, worker_id: str) -> None:
    now = time.time()
    await write_heartbeat(
        resources.redis, Heartbeat(worker_id, 1, "host", "test", now, now, 0, None)
    )


async def test_only_jobs_of_workers_that_are_gone_are_taken_over(
    queue: RedisQueue, resources: Resources
) -> None:
    await _beat(resources, "alive")
    await withdraw_heartbeat(resources.redis, "draining", draining_s=60)
    await _beat(resources, "gone")
    await clear_heartbeat(resources.redis, "gone")  # as its key expiring would leave it
    for key, worker_id in (("a", "alive"), ("d", "draining"), ("g", "gone")):
        await _taken_by(queue, key, worker_id)

    watch = OrphanWatch()
    assert await watch.look(queue, resources.redis) == ["g"]
    assert await saq_adapter.queued_job_keys(queue) == ["g"]
    held = {job.key: job.worker_id for job in await saq_adapter.held_jobs(queue)}
    assert held == {"a": "alive", "d": "draining"}
    assert await watch.look(queue, resources.redis) == []  # nothing left to take over


async def test_a_job_taken_but_never_started_waits_out_the_grace(
    queue: RedisQueue, resources: Resources
) -> None:
    await queue.enqueue("work", key="unmarked")
    assert await queue.dequeue(timeout=1) is not None  # taken; its taker then died
    watch = OrphanWatch()
    start = time.monotonic()
    assert await watch.look(queue, resources.redis, now=start) == []
    assert await watch.look(queue, resources.redis, now=start + UNMARKED_GRACE_S / 2) == []
    taken = await watch.look(queue, resources.redis, now=start + UNMARKED_GRACE_S + 1)
    assert taken == ["unmarked"]
    assert await saq_adapter.queued_job_keys(queue) == ["unmarked"]


async def test_after_a_redis_restart_a_live_workers_job_is_not_taken_over(
    queue: RedisQueue, resources: Resources
) -> None:
    await _beat(resources, "live")
    await _beat(resources, "dead")
    await resources.redis.flushdb()  # Redis restarted empty: every heartbeat key is gone
    # Jobs taken after the restart, before either worker's next beat.
    await _taken_by(queue, "held-by-live", "live")
    await _taken_by(queue, "held-by-dead", "dead")

    watch = OrphanWatch()  # the grace is one heartbeat lifetime
    assert await watch.look(queue, resources.redis) == []
    await _beat(resources, "live")  # its next beat
    assert await watch.look(queue, resources.redis) == []
    held = {job.key: job.worker_id for job in await saq_adapter.held_jobs(queue)}
    assert held == {"held-by-live": "live", "held-by-dead": "dead"}

    # A worker that never beats again is taken for dead once missing for the grace, counted
    # by Redis's clock from the first look that missed it (here a short grace).
    short = OrphanWatch(missing_grace_s=0.5)
    deadline = time.monotonic() + 60
    taken: list[str] = []
    while not taken:
        assert time.monotonic() < deadline, "the dead worker's job was never taken over"
        taken = await short.look(queue, resources.redis)
        await asyncio.sleep(0.1)
    assert taken == ["held-by-dead"]
    assert await saq_adapter.queued_job_keys(queue) == ["held-by-dead"]
    held = {job.key: job.worker_id for job in await saq_adapter.held_jobs(queue)}
    assert held == {"held-by-live": "live"}
