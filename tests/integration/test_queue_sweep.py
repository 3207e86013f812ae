"""The queue's sweep (SAQ's worker calls it every minute) on a real Redis: it leaves every job a
worker holds to that worker or to the orphan watch, and only drops ids whose payload is gone.

SAQ's own sweep aborted a job a live worker had just taken (still marked queued for one more
round trip, longer on a loaded machine) and queued it again beside the running one: an ingest
job so aborted left its events `enqueued` with no job, for the outbox relay's late pass."""

from __future__ import annotations

import inspect
import time
from collections.abc import AsyncIterator

import pytest
from saq import Job, Status, Worker

from app.queue import saq_adapter
from app.queue.saq_adapter import LeanRedisQueue
from app.settings import Settings


@pytest.fixture
async def queue(settings: Settings) -> AsyncIterator[LeanRedisQueue]:
    opened = LeanRedisQueue.from_url(settings.redis_url, name="sweep-contract")
    await opened.connect()
    try:
        yield opened
    finally:
        await opened.disconnect()


def _job(key: str, *, timeout: int = 120) -> Job:
    return Job(
        function="ingest_event",
        kwargs={"event_ids": [1]},
        key=key,
        timeout=timeout,
        retries=5,
        retry_delay=1.0,
        retry_backoff=60.0,
    )


async def _held(queue: LeanRedisQueue) -> list[str]:
    return [job.key for job in await saq_adapter.held_jobs(queue)]


async def test_saqs_worker_still_sweeps_through_its_queue() -> None:
    source = inspect.getsource(Worker.upkeep)
    assert "self.queue.sweep" in source, "SAQ's worker no longer calls queue.sweep"


async def test_a_job_just_taken_is_left_to_its_taker(queue: LeanRedisQueue) -> None:
    await queue.enqueue(_job("ingest:1-1"))
    taken = await queue.dequeue()
    assert taken is not None
    # Its taker has not marked it active yet (its event loop is busy): the sweep runs now.
    assert await queue.sweep() == []
    stored = await queue.job("ingest:1-1")
    assert stored is not None
    assert stored.status == Status.QUEUED
    assert not await queue.redis.exists(taken.abort_id), "the sweep asked the job to abort"
    assert await _held(queue) == ["ingest:1-1"]
    assert await saq_adapter.pending_job_keys(queue) == ["ingest:1-1"]

    # The taker runs it, once: nothing else waits under its key.
    taken.attempts, taken.worker_id, taken.started = 1, "alive", int(time.time() * 1000)
    await taken.update(status=Status.ACTIVE)
    await taken.finish(Status.COMPLETE, result={"processed": 1})
    done = await queue.job("ingest:1-1")
    assert done is not None
    assert (done.status, done.attempts) == (Status.COMPLETE, 1)
    assert await saq_adapter.pending_job_keys(queue) == []
    assert await _held(queue) == []


async def test_a_running_job_past_its_timeout_is_left_to_its_worker(
    queue: LeanRedisQueue,
) -> None:
    await queue.enqueue(_job("deliver:7", timeout=1))
    taken = await queue.dequeue()
    assert taken is not None
    taken.attempts, taken.worker_id = 1, "alive"
    taken.started = int(time.time() * 1000) - 10_000
    await taken.update(status=Status.ACTIVE)
    assert await queue.sweep() == []
    stored = await queue.job("deliver:7")
    assert stored is not None
    assert stored.status == Status.ACTIVE
    assert await _held(queue) == ["deliver:7"]


async def test_an_id_whose_payload_is_gone_is_dropped(queue: LeanRedisQueue) -> None:
    await queue.enqueue(_job("ingest:2-2"))
    taken = await queue.dequeue()
    assert taken is not None
    await queue.redis.delete(taken.id)  # as its payload expiring would leave it
    await queue.enqueue(_job("ingest:3-3"))
    kept = await queue.dequeue()
    assert kept is not None
    assert await queue.sweep() == [taken.id]
    assert await queue.count("active") == 1
    assert await _held(queue) == ["ingest:3-3"]
    assert await saq_adapter.pending_job_keys(queue) == ["ingest:3-3"]
