"""The SAQ internals app/queue/saq_adapter.py relies on, pinned against the installed SAQ on a
real Redis: an upgrade that changes one fails here, saying which, before it breaks the
pipelined enqueue, the draining worker or the tests' view of the queue."""

from __future__ import annotations

import asyncio
import inspect
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import saq
from redis.asyncio import Redis
from saq import CronJob, Job, Worker
from saq.queue.redis import RedisQueue

from app.queue import saq_adapter
from app.settings import Settings

CHANGED = "SAQ {version} changed {what}, which app/queue/saq_adapter.py relies on"


def pinned(holds: bool, what: str) -> None:
    assert holds, CHANGED.format(version=saq.__version__, what=what)


@pytest.fixture
async def queue(settings: Settings) -> AsyncIterator[RedisQueue]:
    opened = RedisQueue.from_url(settings.redis_url, name="saq-contract")
    await opened.connect()
    # SAQ's own sweep (which the product's LeanRedisQueue replaces) runs as a worker starts and
    # aborts a job it reads between its dequeue and its ACTIVE mark: on a loaded machine it
    # took a job these tests hold running. Holding the sweep's lock keeps it out of them.
    await opened.redis.set(opened._sweep, 1, ex=3600)
    try:
        yield opened
    finally:
        await opened.disconnect()


async def _eventually(check: Callable[[], bool], what: str, within_s: float = 20) -> None:
    deadline = time.monotonic() + within_s
    while not check():
        assert time.monotonic() < deadline, f"{what}: not within {within_s:g} s"
        await asyncio.sleep(0.02)


def _comparable(job: Job) -> dict[str, Any]:
    return {k: v for k, v in job.to_dict().items() if k not in {"key", "kwargs", "queued"}}


def _job(key: str, n: int) -> Job:
    return Job(function="work", kwargs={"n": n}, key=key, timeout=77, retries=3, ttl=900)


async def test_the_pipelined_enqueue_still_matches_saqs_own(queue: RedisQueue) -> None:
    for name in ("_incomplete", "_queued"):
        pinned(isinstance(getattr(queue, name, None), str), f"RedisQueue.{name} (a key name)")
    pinned(callable(getattr(queue, "_dump", None)), "RedisQueue._dump (the serializer)")
    pinned(
        inspect.iscoroutinefunction(getattr(queue, "_before_enqueue", None)),
        "RedisQueue._before_enqueue (runs the before-enqueue callbacks)",
    )
    pinned(
        getattr(queue, "_enqueue_script", False) is None,
        "RedisQueue._enqueue_script (None until the first enqueue registers it)",
    )
    pinned(isinstance(getattr(saq.job, "ABORT_ID_PREFIX", None), str), "saq.job.ABORT_ID_PREFIX")
    stamped: list[str] = []

    async def stamp(job: Job) -> None:
        stamped.append(job.key)
        job.meta = {"stamped": True}

    queue.register_before_enqueue(stamp)
    jobs = [(f"k{n}", {"n": n}) for n in range(4)]
    # The first call enqueues its first job SAQ's ordinary way, which registers the script.
    assert await saq_adapter.enqueue_pipelined(queue, _job("k0", 0), jobs[:2]) == 2
    pinned(
        getattr(queue, "_enqueue_script", None) is not None,
        "RedisQueue._enqueue_script (set by the first enqueue)",
    )
    # Now every job goes through the pipeline; pending keys coalesce.
    assert await saq_adapter.enqueue_pipelined(queue, _job("k0", 0), jobs) == 2
    assert await saq_adapter.enqueue_pipelined(queue, _job("k0", 0), jobs) == 0
    reference = await queue.enqueue(_job("reference", 9))
    assert reference is not None
    # The callbacks run once per call, on its first job, and what they set is on every job.
    assert stamped == ["k0", "k0", "k0", "reference"]
    for key, kwargs in jobs:
        job = await queue.job(key)
        pinned(job is not None, "the enqueue script's keys (a job is not found by its key)")
        assert job is not None
        assert (job.kwargs, job.meta) == (kwargs, {"stamped": True})
        pinned(_comparable(job) == _comparable(reference), "the payload of an enqueued job")
    # In the queue SAQ's dequeue reads, in order: the enqueue script's queued list.
    pinned(await queue.count("queued") == 5, "the enqueue script's queued list")
    dequeued = await queue.dequeue(timeout=1)
    assert dequeued is not None
    assert dequeued.key == "k0"


async def blocked(ctx: dict[str, Any], *, release: str) -> str:
    await ctx["gates"][release].wait()
    return release


async def tick(ctx: dict[str, Any]) -> None:
    return None


async def test_the_worker_still_tracks_running_jobs_and_its_stop(queue: RedisQueue) -> None:
    gates = {"gate": asyncio.Event()}

    async def startup(ctx: dict[str, Any]) -> None:
        ctx["gates"] = gates

    worker = Worker[Any](queue, functions=[blocked], startup=startup, concurrency=2)
    pinned(isinstance(getattr(worker, "job_task_contexts", None), dict), "Worker.job_task_contexts")
    running = asyncio.create_task(worker.start())
    try:
        await queue.enqueue("blocked", key="held", release="gate")
        await _eventually(
            lambda: len(saq_adapter.running_job_tasks(worker)) == 1, "the job to be running"
        )
        (task,) = saq_adapter.running_job_tasks(worker)
        pinned(isinstance(task, asyncio.Task), "Worker.job_task_contexts[job]['task']")
        assert not task.done()
        assert await saq_adapter.pending_job_keys(queue) == ["held"]
        event = saq_adapter.stop_event(worker)
        pinned(isinstance(event, asyncio.Event), "Worker.event (set when the worker stops)")
        assert not event.is_set()
        gates["gate"].set()
        await task
        await _eventually(
            lambda: saq_adapter.running_job_tasks(worker) == [], "the job to leave the table"
        )
        await worker.stop()
        pinned(saq_adapter.stop_event(worker).is_set(), "Worker.event (set by Worker.stop)")
    finally:
        await worker.stop()
        await asyncio.wait_for(running, timeout=30)


async def test_crons_are_still_keyed_by_their_function(queue: RedisQueue) -> None:
    worker = Worker[Any](queue, functions=[], cron_jobs=[CronJob(tick, cron="0 0 1 1 *")])
    await worker.schedule()  # enqueues the cron's next run, a long way off
    pinned(
        await saq_adapter.pending_job_keys(queue, crons=True)
        == [saq_adapter.CRON_KEY_PREFIX + "tick"],
        "the key of a cron job (cron:<function>)",
    )
    assert await saq_adapter.pending_job_keys(queue) == []
    assert await saq_adapter.queued_job_keys(queue) == []


async def test_waiting_running_and_scheduled_keys_are_told_apart(queue: RedisQueue) -> None:
    for key in ("b", "a", "c"):
        await queue.enqueue("work", key=key)
    await queue.enqueue("work", key="later", scheduled=int(time.time()) + 3600)
    pinned(
        await saq_adapter.queued_job_keys(queue) == ["b", "a", "c"],
        "the queued list (waiting jobs, oldest first)",
    )
    taken = await queue.dequeue(timeout=1)
    assert taken is not None
    assert taken.key == "b"
    assert await saq_adapter.queued_job_keys(queue) == ["a", "c"]
    pinned(
        sorted(await saq_adapter.pending_job_keys(queue)) == ["a", "b", "c", "later"],
        "the incomplete set (queued, running and scheduled jobs)",
    )


async def test_held_jobs_carry_their_worker_and_requeue_only_as_seen(queue: RedisQueue) -> None:
    gates = {"gate": asyncio.Event()}

    async def startup(ctx: dict[str, Any]) -> None:
        ctx["gates"] = gates

    worker = Worker[Any](queue, functions=[blocked], startup=startup, concurrency=1, id="w-one")
    running = asyncio.create_task(worker.start())
    try:
        await queue.enqueue("blocked", key="held", release="gate", retries=1)
        held: list[saq_adapter.HeldJob] = []

        async def taken() -> bool:
            held[:] = [job for job in await saq_adapter.held_jobs(queue) if job.status == "active"]
            return bool(held)

        deadline = time.monotonic() + 20
        while not await taken():
            assert time.monotonic() < deadline, "the job was never marked active"
            await asyncio.sleep(0.02)
        (job,) = held
        pinned(
            (job.key, job.worker_id, job.attempts, job.function) == ("held", "w-one", 1, "blocked"),
            "the active list and the worker_id/attempts SAQ stamps on a job it runs",
        )
        # Another worker's requeue wins once; the same view cannot requeue it again.
        assert await saq_adapter.requeue_held(queue, job, "taken over: test") is True
        assert await saq_adapter.requeue_held(queue, job, "taken over: test") is False
        assert await saq_adapter.queued_job_keys(queue) == ["held"]
        stored = await queue.job("held")
        assert stored is not None
        assert (stored.status, stored.error, stored.attempts) == ("queued", "taken over: test", 1)
    finally:
        gates["gate"].set()
        await worker.stop()
        await asyncio.wait_for(running, timeout=30)


async def test_a_finished_job_is_not_requeued(queue: RedisQueue) -> None:
    await queue.enqueue("work", key="done-soon")
    taken = await queue.dequeue(timeout=1)
    assert taken is not None
    (seen,) = await saq_adapter.held_jobs(queue)
    await queue.finish(taken, saq.Status.COMPLETE)
    assert await saq_adapter.held_jobs(queue) == []
    assert await saq_adapter.requeue_held(queue, seen, "taken over: test") is False
    assert await saq_adapter.queued_job_keys(queue) == []


async def echo(ctx: dict[str, Any], *, value: int) -> int:
    return value


async def _run_jobs(queue: RedisQueue) -> tuple[list[Job | None], list[list[str]]]:
    """One job taken from a waiting queue, one that arrives while the worker waits: each job
    as stored afterwards, and the statuses published for each."""
    keys = ("waiting", "arriving")
    heard: dict[str, list[str]] = {key: [] for key in keys}
    pubsub = queue.redis.pubsub()
    await pubsub.subscribe(*(queue.job_id(key) for key in keys))

    async def listen() -> None:
        async for message in pubsub.listen():
            if message["type"] == "message":
                key = queue.job_key_from_id(message["channel"].decode())
                heard[key].append(message["data"].decode())

    listener = asyncio.create_task(listen())
    await queue.enqueue("echo", key="waiting", value=1)
    worker = Worker[Any](queue, functions=[echo], concurrency=1)
    running = asyncio.create_task(worker.start())
    try:
        await _eventually(lambda: "complete" in heard["waiting"], "the waiting job to finish")
        await queue.enqueue("echo", key="arriving", value=2)
        await _eventually(lambda: "complete" in heard["arriving"], "the arriving job to finish")
    finally:
        await worker.stop()
        await asyncio.wait_for(running, timeout=30)
        listener.cancel()
        await asyncio.gather(listener, return_exceptions=True)
        await pubsub.aclose()
    assert await saq_adapter.pending_job_keys(queue) == []
    assert await saq_adapter.queued_job_keys(queue) == []
    assert await saq_adapter.held_jobs(queue) == []
    return await queue.jobs(keys), [heard[key] for key in keys]


async def test_the_lean_queue_runs_a_job_as_saqs_own_does(settings: Settings) -> None:
    for name in ("dequeue", "_update", "_finish"):
        pinned(callable(getattr(RedisQueue, name, None)), f"RedisQueue.{name}")
    pinned(isinstance(getattr(RedisQueue(Redis(), name="x"), "_active", None), str), "_active")
    results = []
    for queue_class in (RedisQueue, saq_adapter.LeanRedisQueue):
        queue = queue_class.from_url(settings.redis_url, name=f"saq-{queue_class.__name__}")
        await queue.connect()
        try:
            results.append(await _run_jobs(queue))
        finally:
            await queue.disconnect()
    (saq_jobs, saq_heard), (lean_jobs, lean_heard) = results
    assert lean_heard == saq_heard == [["active", "complete"], ["active", "complete"]]
    for saq_job, lean_job in zip(saq_jobs, lean_jobs, strict=True):
        assert saq_job is not None
        assert lean_job is not None
        assert (lean_job.status, lean_job.result, lean_job.attempts) == (
            saq_job.status,
            saq_job.result,
            saq_job.attempts,
        )
        assert lean_job.status == saq.Status.COMPLETE
        assert lean_job.worker_id is not None


def test_the_lean_serializer_writes_what_saqs_own_does() -> None:
    pinned(callable(getattr(Job, "to_dict", None)), "Job.to_dict (what SAQ serializes)")
    saq_queue = RedisQueue(Redis(), name="serialize")  # never connected
    lean_queue = saq_adapter.LeanRedisQueue(Redis(), name="serialize")
    jobs = [
        Job(function="work"),
        Job(function="work", kwargs={"n": 1}, queue=lean_queue, key="k", timeout=0, ttl=-1),
        Job(
            function="work",
            kwargs={"ids": [1, 2]},
            queue=lean_queue,
            status=saq.Status.ACTIVE,
            attempts=2,
            started=1,
            worker_id="w",
            result={"sent": True},
            error="boom",
            meta={"m": 1},
            progress=0.5,
        ),
        Job(function="work", meta={}, result=0, retry_backoff=True, scheduled=5),
    ]
    for job in jobs:
        assert json.loads(lean_queue.serialize(job)) == json.loads(saq_queue.serialize(job))


@pytest.mark.parametrize("ttl", [-1, 0, 30])
async def test_the_lean_finish_keeps_a_job_as_saqs_own_does(settings: Settings, ttl: int) -> None:
    stored = []
    for queue_class in (RedisQueue, saq_adapter.LeanRedisQueue):
        queue = queue_class.from_url(settings.redis_url, name=f"finish-{queue_class.__name__}")
        await queue.connect()
        try:
            await queue.enqueue(Job(function="work", key="done", ttl=ttl))
            job = await queue.dequeue(timeout=1)
            assert job is not None
            await queue.update(job, status=saq.Status.ACTIVE)
            await queue.finish(job, saq.Status.COMPLETE, result={"ok": 1})
            kept = await queue.job("done")
            expires = await queue.redis.ttl(queue.job_id("done"))
            stored.append(
                (
                    None if kept is None else (kept.status, kept.result, kept.attempts),
                    expires if expires < 0 else "expires",
                    await queue.count("active"),
                    await queue.count("incomplete"),
                )
            )
        finally:
            await queue.disconnect()
    assert stored[0] == stored[1]
