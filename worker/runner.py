"""Builds and runs the SAQ worker from the job registry (`app.jobs.registry`): its functions,
their options and crons; resources at startup, a heartbeat, a clean stop on SIGTERM.

A worker process consumes every lane (`app.queue.Lane`): one SAQ worker per lane's queue,
the work lane's `WORKER_CONCURRENCY` slots and the control lane's
`WORKER_CONTROL_CONCURRENCY`, sharing the process's resources, heartbeat and worker id (so
the orphan watch knows whose jobs they are). The work lane's worker is the one started and
stopped; it starts the others once its resources are open and drains them with its own.

The worker refuses to start when the registry disagrees with itself (`registry_problems`):
a job SAQ could not find a function for would fail on every run instead.

The heartbeat is an asyncio task beside SAQ's loop rather than a queued cron job: a cron job
waits behind the backlog, so a worker busy with 10,000 queued sends would look dead exactly
when it is working hardest. Queue health (depth, stuck) is reported separately.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import socket
import time
import uuid
from collections.abc import Coroutine, Sequence
from typing import Any

import uvloop
from saq import CronJob, Worker

from app import __version__
from app.heartbeat import (
    HEARTBEAT_INTERVAL_S,
    Heartbeat,
    clear_heartbeat,
    withdraw_heartbeat,
    write_heartbeat,
)
from app.jobs.registry import JOBS, RegisteredJob, registry_problems
from app.metrics import worker_metrics
from app.queue import JobQueue, Lane, open_queue
from app.queue.saq_adapter import running_job_tasks, stop_event
from app.resources import Resources
from app.settings import Settings
from worker.context import WorkerState, state_of
from worker.liveness import watch_for_orphans

logger = logging.getLogger("oncereply.worker")


class WorkerConfigError(Exception):
    """The job registry disagrees with itself; a programming error caught at start."""


class DrainingWorker(Worker[Any]):
    """A SAQ worker that, on stop, waits only for jobs actually running.

    SAQ's own grace period also waits for its idle loops (a blocking dequeue, a 60 s sweep
    timer), so every stop took the full grace period. Here running jobs get up to
    `drain_timeout_s` to finish and record their outcome; then the rest is cancelled at once.
    A job cancelled mid-send is not lost or repeated: its claim stays in Postgres and the
    stale-claim sweep settles it.
    """

    def __init__(self, *args: Any, drain_timeout_s: float, **kwargs: Any) -> None:
        super().__init__(*args, shutdown_grace_period_s=None, **kwargs)
        self.drain_timeout_s = drain_timeout_s
        # The other lanes' workers, started by this one's startup and stopped with it.
        self.companions: list[LaneWorker] = []

    @property
    def lanes(self) -> list[Worker[Any]]:
        """This worker and its companions: one per lane."""
        return [self, *self.companions]

    def add_after_process(self, hook: Any) -> None:
        """Run `hook(ctx)` after every job of every lane (the benches count jobs so)."""
        for worker in self.lanes:
            worker.after_process = [*(worker.after_process or []), hook]

    async def stop(self) -> None:
        for worker in self.lanes:
            stop_event(worker).set()
        deadline = time.monotonic() + self.drain_timeout_s
        # Loop because an idle dequeue may still hand over a job while we wait.
        while True:
            running = [task for worker in self.lanes for task in running_job_tasks(worker)]
            remaining = deadline - time.monotonic()
            if not running or remaining <= 0:
                break
            await asyncio.wait(running, timeout=remaining)
        for companion in self.companions:
            await companion.stop()
        await super().stop()


class LaneWorker(DrainingWorker):
    """Another lane's worker in the same process: the work lane's worker starts it, handles
    the signals and drains it (so it waits for nothing of its own when stopped)."""

    SIGNALS: list[Any] = []  # noqa: RUF012 - SAQ's class attribute; the process's are the work lane's


def build_worker(
    settings: Settings,
    *,
    worker_id: str | None = None,
    jobs: Sequence[RegisteredJob] = JOBS,
) -> DrainingWorker:
    """The worker for `jobs` (the registry; a bench may pass it without crons)."""
    problems = registry_problems(jobs)
    if problems:
        raise WorkerConfigError("; ".join(problems))
    options = {job.name: job.options for job in jobs}
    control_slots = settings.worker_control_concurrency

    identity = worker_id or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"

    async def startup(ctx: dict[str, Any]) -> None:
        # No pre-ping: worker connections are in constant use, and a pre-ping is a round trip
        # on every checkout (two per delivery). A connection that died (a database restart)
        # fails its first statement instead: before a claim that sends nothing and the relay
        # retries; after a send the delivery records its outcome on a fresh connection.
        resources = await Resources.open(
            settings,
            jobs=options,
            # Every running job may hold a connection at once: kept open, not opened and
            # closed again as overflow (a server process each time; bench.deliver counted 117
            # new connections per 1,000 deliveries with 20 kept for 36 jobs).
            db_pool_size=settings.worker_concurrency + control_slots,
            # Room beyond that for the heartbeat, the orphan watcher and a delivery's fresh
            # recording connection, so a burst never waits out the pool's timeout.
            db_max_overflow=8,
            db_pre_ping=False,
        )
        if settings.worker_metrics_port is not None:
            # Off by default; a port in use stops the worker here, before it takes a job.
            worker_metrics(settings.worker_metrics_host, settings.worker_metrics_port)
            logger.info(
                "metrics on http://%s:%d/metrics",
                settings.worker_metrics_host,
                settings.worker_metrics_port,
            )
        state = WorkerState(worker_id=identity, resources=resources, started_at=time.time())
        ctx["state"] = state
        # Everything loaded so far lives as long as the process: keep it out of the garbage
        # collector's full passes, which otherwise walk it again and again while jobs
        # allocate (ingest fan-out: ~20% less CPU per comment, bench/ingest.py).
        gc.freeze()
        await _beat(state)
        stopping = stop_event(ctx["worker"])
        # Running jobs may take the drain, then SAQ's cancellation, to end: theirs until then.
        draining_s = settings.send_timeout_s + 5 + 2 + HEARTBEAT_INTERVAL_S
        task = asyncio.create_task(_heartbeat_loop(state, stopping, draining_s), name="heartbeat")
        state.background.add(task)
        watcher = asyncio.create_task(
            watch_for_orphans(resources.queue.lanes, resources.redis, stopping), name="orphans"
        )
        state.background.add(watcher)
        worker = ctx["worker"]
        for companion in worker.companions:
            companion.context["state"] = state
            state.background.add(
                asyncio.create_task(companion.start(), name=f"lane {companion.queue.name}")
            )
        logger.info("worker %s started (concurrency %d)", identity, settings.worker_concurrency)

    async def shutdown(ctx: dict[str, Any]) -> None:
        state = state_of(ctx)
        for task in list(state.background):
            if isinstance(task, asyncio.Task):
                task.cancel()
        await clear_heartbeat(state.resources.redis, state.worker_id)
        await state.resources.close()
        logger.info("worker %s stopped after %d jobs", identity, state.jobs_done)

    async def after_process(ctx: dict[str, Any]) -> None:
        state = state_of(ctx)
        state.jobs_done += 1
        job = ctx.get("job")
        error = getattr(job, "error", None)
        if error:
            state.last_error = str(error).strip().splitlines()[-1][:300]

    # Crons are enqueued by SAQ's scheduler through their lane's queue, which stamps their
    # options as it does every job's; the CronJob carries the same ones. Every lane's worker
    # knows every function, so a job queued in another lane by an earlier version still runs.
    queue = open_queue(settings, options)

    def crons_of(lane: Lane) -> list[CronJob[Any]]:
        return [
            CronJob(
                job.function,
                cron=job.cron,
                timeout=job.options.timeout_for(settings.send_timeout_s),
                retries=job.options.retries,
                ttl=job.options.ttl,
            )
            for job in jobs
            if job.cron is not None and job.options.lane is lane
        ]

    functions = [job.function for job in jobs]
    # In-flight sends get the time to finish and record their outcome before we exit.
    drain_timeout_s = settings.send_timeout_s + 5
    worker = DrainingWorker(
        queue,
        functions=functions,
        id=identity,
        concurrency=settings.worker_concurrency,
        cron_jobs=crons_of(Lane.WORK),
        startup=startup,
        shutdown=shutdown,
        after_process=after_process,
        drain_timeout_s=drain_timeout_s,
        cancellation_hard_deadline_s=2.0,
    )
    worker.companions = [
        _lane_worker(lane_queue, functions, identity, control_slots, crons_of(lane_queue.lane))
        for lane_queue in queue.lanes
        if lane_queue.lane is not Lane.WORK
    ]
    for companion in worker.companions:
        companion.after_process = worker.after_process
    return worker


def _lane_worker(
    queue: JobQueue,
    functions: list[Any],
    identity: str,
    concurrency: int,
    crons: list[CronJob[Any]],
) -> LaneWorker:
    return LaneWorker(
        queue,
        functions=functions,
        id=identity,
        concurrency=concurrency,
        cron_jobs=crons,
        # The work lane's worker drains this one's jobs with its own before stopping it.
        drain_timeout_s=0,
        cancellation_hard_deadline_s=2.0,
    )


async def _beat(state: WorkerState) -> None:
    await write_heartbeat(
        state.resources.redis,
        Heartbeat(
            worker_id=state.worker_id,
            pid=os.getpid(),
            host=socket.gethostname(),
            version=__version__,
            started_at=state.started_at,
            beat_at=time.time(),
            jobs_done=state.jobs_done,
            last_error=state.last_error,
        ),
    )


async def _heartbeat_loop(state: WorkerState, stopping: asyncio.Event, draining_s: float) -> None:
    """Beat every 4 s until SAQ starts stopping (SIGTERM), then withdraw the heartbeat at once.

    A stopping worker takes no new jobs, so the dashboard should stop calling it healthy now,
    not when the grace period for in-flight sends has run out; its running jobs stay its own
    (a draining mark, `draining_s`) so no other worker takes them over meanwhile.
    """
    while not stopping.is_set():
        try:
            await asyncio.wait_for(stopping.wait(), timeout=HEARTBEAT_INTERVAL_S)
        except TimeoutError:
            try:
                await _beat(state)
            except Exception:  # a missed beat is logged; the next one may succeed
                logger.warning("could not write the worker heartbeat", exc_info=True)
    await withdraw_heartbeat(state.resources.redis, state.worker_id, draining_s)
    logger.info("worker %s is stopping; heartbeat withdrawn", state.worker_id)


async def run_worker(settings: Settings) -> None:
    worker = build_worker(settings)
    await worker.start()


def run_in_worker_loop(main: Coroutine[Any, Any, None]) -> None:
    """Run the worker's coroutine to its end on uvloop's event loop.

    Most of a delivery's CPU in the worker is the event loop's own Python (callbacks, timers,
    socket transports) between short statements and calls; uvloop's loop does that work in C.
    """
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(main)
