"""A SIGKILLed worker is noticed and the job it held runs again on another worker, well before
its timeout; a worker that is only stopping (SIGTERM) keeps its jobs while it drains.

Real worker processes, a real delivery job held in a send the sandbox leaves hanging. Waits
are on progress with generous deadlines; the seconds themselves are measured by
`bench/liveness.py`, not asserted here.
"""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import redis

from app.delivery.send.scheduling import delivery_key, enqueue_delivery
from app.queue.saq_adapter import held_jobs
from tests.integration.delivery.conftest import World
from tests.support.processes import Service, start_worker, wait_until

# A send that hangs this long keeps the job held by the first worker for the whole test.
HANG_S = 240
# The job's own timeout is 30 + 4 × SEND_TIMEOUT_S: with 60 s, SAQ alone would wait 270 s.
SLOW_SEND_S = "60"


def _beating(redis_url: str) -> int:
    """How many workers have a live heartbeat key."""
    client = redis.Redis.from_url(redis_url)
    try:
        return len(list(client.scan_iter("oncereply:worker:heartbeat:*")))
    finally:
        client.close()


async def _holder(world: World, key: str) -> tuple[str | None, int] | None:
    for job in await held_jobs(world.resources.queue):
        if job.key == key and job.status == "active":
            return job.worker_id, job.attempts
    return None


async def _wait_for_holder(
    world: World, key: str, *, other_than: str | None, within_s: float
) -> tuple[str, int]:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        holder = await _holder(world, key)
        if holder is not None and holder[0] is not None and holder[0] != other_than:
            return holder[0], holder[1]
        job = await world.resources.queue.job(key)
        if job is not None and job.worker_id not in (None, other_than) and job.attempts >= 2:
            return job.worker_id, job.attempts  # already ran again and finished
        await asyncio.sleep(0.2)
    raise TimeoutError(f"no worker other than {other_than} took {key} within {within_s} s")


def _live(service: Service) -> bool:
    if not service.running:
        raise RuntimeError(f"{service.name} exited:\n{service.output()[-3000:]}")
    return True


async def test_a_job_held_by_a_killed_worker_runs_again_on_another(
    world: World, delivery_env: dict[str, str], artifacts_dir: Path
) -> None:
    row = await world.comment()
    world.admin.add_fault("messages", "deliver_then_hang", seconds=HANG_S, times=1)
    env = {**delivery_env, "SEND_TIMEOUT_S": SLOW_SEND_S}
    first = start_worker(env, artifacts_dir, "held-worker")
    second: Service | None = None
    try:
        await enqueue_delivery(world.resources.queue, row.id)
        key = delivery_key(row.id, None)
        wait_until(
            lambda: _live(first) and world.stats(row.trigger_id)["send_requests"] == 1,
            timeout=90,
            what="the first worker's send to reach the sandbox",
        )
        holder, attempts = await _wait_for_holder(world, key, other_than=None, within_s=30)
        assert attempts == 1

        second = start_worker(env, artifacts_dir, "takeover-worker")
        wait_until(
            lambda: _live(second) and _beating(env["REDIS_URL"]) == 2,
            timeout=90,
            what="the second worker's heartbeat",
        )
        assert await _holder(world, key) == (holder, 1)  # a live holder keeps its job

        first.kill()  # SIGKILL: no hook runs; the heartbeat expires on its own
        # The job's timeout is 270 s; the take-over must come from liveness, not from SAQ.
        taker, attempts = await _wait_for_holder(world, key, other_than=holder, within_s=150)
        assert taker != holder
        assert attempts == 2
    finally:
        first.kill()
        if second is not None:
            second.stop(timeout=60)
    # Taken over, the job found the row IN_FLIGHT under the dead worker's claim and sent
    # nothing: the sandbox saw one request only.
    assert world.stats(row.trigger_id)["send_requests"] == 1
    assert len(world.inbox("jane.doe")) == 1


async def test_a_stopping_worker_keeps_its_running_job(
    world: World, delivery_env: dict[str, str], artifacts_dir: Path
) -> None:
    row = await world.comment()
    # Shorter than the drain (SEND_TIMEOUT_S + 5): the stopping worker finishes it itself;
    # long enough for the watching worker to start and beat while the send hangs.
    world.admin.add_fault("messages", "deliver_then_hang", seconds=20, times=1)
    env = {**delivery_env, "SEND_TIMEOUT_S": "30"}
    first = start_worker(env, artifacts_dir, "draining-worker")
    second: Service | None = None
    try:
        wait_until(
            lambda: _live(first) and _beating(env["REDIS_URL"]) == 1,
            timeout=90,
            what="the first worker's heartbeat",
        )
        # The watcher starts only once the job is taken: a worker waiting on the queue would
        # take it as soon as it is enqueued, even while stopped.
        await enqueue_delivery(world.resources.queue, row.id)
        key = delivery_key(row.id, None)
        wait_until(
            lambda: world.stats(row.trigger_id)["send_requests"] == 1,
            timeout=90,
            what="the first worker's send to reach the sandbox",
        )
        second = start_worker(env, artifacts_dir, "watching-worker")
        watcher = second
        wait_until(
            lambda: _live(watcher) and _beating(env["REDIS_URL"]) == 2,
            timeout=90,
            what="the watching worker's heartbeat",
        )
        holder, _ = await _wait_for_holder(world, key, other_than=None, within_s=30)
        first.signal(signal.SIGTERM)
        assert first.process is not None
        assert first.process.wait(timeout=120) == 0
        job = await world.resources.queue.job(key)
        assert job is not None
        # It ran once, on the worker that took it, while the other watched for orphans.
        assert (job.worker_id, job.attempts) == (holder, 1), job.error
    finally:
        first.kill()
        if second is not None:
            second.stop(timeout=60)
    assert world.stats(row.trigger_id)["send_requests"] == 1
