"""The job queue a process opens, and the one way to put jobs on it.

Jobs are enqueued by name (`JobName`) and run with the options the process opened its queue
with: `open_queue(settings, options)`, where each entry point (the web's lifespan, the CLI,
the worker, the benches, test fixtures) passes `app.jobs.registry.JOB_OPTIONS`. The queue
stamps them on every job it enqueues, through SAQ's own enqueue (crons included) and through
`enqueue_many`'s pipeline alike, with the timeout for this process's send timeout; the worker
that runs the job is configured alike. The web enqueues jobs and never imports the worker.

The queue is one SAQ queue per lane (`Lane`): `enqueue` and `enqueue_many` put a job on its
lane's queue, and a lane's queue refuses a job of another lane (`WrongLaneError`).

Nothing falls back to SAQ's defaults (10 s, no retry): `enqueue` and `enqueue_many` refuse a
queue not opened by `open_queue` (`QueueNotConfiguredError`), and the queue refuses a job
whose name it has no options for (`UnknownJobError`).

SAQ keys only coalesce jobs while one is queued or running; the durable dedupe is in Postgres.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from redis.asyncio import Redis
from saq import Job, Queue

from app.queue import saq_adapter
from app.queue.names import JobName
from app.queue.options import JobOptions, Lane
from app.settings import Settings


class QueueNotConfiguredError(RuntimeError):
    """A job was enqueued on a queue opened without the job options (not by `open_queue`)."""


class UnknownJobError(LookupError):
    """A job was enqueued under a name the queue has no options for."""


class WrongLaneError(LookupError):
    """A job was put on the SAQ queue of a lane it does not run in."""


def lane_queue_name(base: str, lane: Lane) -> str:
    """The SAQ queue of `lane`: the work lane keeps the configured name (`QUEUE_NAME`), so the
    deliveries already queued under it are still found after an upgrade."""
    return base if lane is Lane.WORK else f"{base}-{lane.value}"


class JobQueue(saq_adapter.LeanRedisQueue):
    """A SAQ Redis queue for one lane that stamps each job it enqueues with the options of its
    name, and knows its sibling lanes: `lane_for` gives the queue a job of a name goes to.

    `open_queue` gives the work lane's queue, which connects and disconnects the others.
    """

    def __init__(
        self,
        redis: Redis,
        *,
        name: str,
        options: Mapping[JobName, JobOptions],
        send_timeout_s: float,
        lane: Lane = Lane.WORK,
    ) -> None:
        super().__init__(redis, name=name)
        self.lane = lane
        self.options: dict[str, JobOptions] = {str(job): spec for job, spec in options.items()}
        self.send_timeout_s = send_timeout_s
        self._lanes: dict[Lane, JobQueue] = {lane: self}
        self._siblings: list[JobQueue] = []
        self.register_before_enqueue(self._stamp)

    @property
    def lanes(self) -> tuple[JobQueue, ...]:
        """Every lane's queue, the work lane first."""
        return tuple(self._lanes[lane] for lane in Lane if lane in self._lanes)

    def of_lane(self, lane: Lane) -> JobQueue:
        """The queue of `lane`."""
        return self._lanes[lane]

    def lane_for(self, name: str) -> JobQueue:
        """The queue a job named `name` goes to."""
        return self._lanes[self._options_of(name).lane]

    def attach(self, sibling: JobQueue) -> None:
        """Make `sibling` (another lane, opened with the same options) one of this queue's lanes;
        this queue connects and disconnects it."""
        self._lanes[sibling.lane] = sibling
        sibling._lanes = self._lanes
        self._siblings.append(sibling)

    async def connect(self) -> None:
        await super().connect()
        for sibling in self._siblings:
            await sibling.connect()

    async def disconnect(self) -> None:
        for sibling in self._siblings:
            await sibling.disconnect()
        await super().disconnect()

    def _options_of(self, name: str) -> JobOptions:
        options = self.options.get(name)
        if options is None:
            raise UnknownJobError(
                f"queue {self.name!r} has no options for job {name!r}; "
                "every job is declared in app.jobs.registry"
            )
        return options

    async def _stamp(self, job: Job) -> None:
        options = self._options_of(job.function)
        if options.lane is not self.lane:
            raise WrongLaneError(
                f"job {job.function!r} runs in the {options.lane.value} lane, not on queue "
                f"{self.name!r}; enqueue it through app.queue.enqueue"
            )
        job.timeout = options.timeout_for(self.send_timeout_s)
        job.retries = options.retries
        job.retry_delay = options.retry_delay
        job.retry_backoff = options.retry_backoff
        job.heartbeat = options.heartbeat
        job.ttl = options.ttl


def open_queue(settings: Settings, options: Mapping[JobName, JobOptions]) -> JobQueue:
    """The process's job queue (not yet connected): the work lane's, with the other lanes
    attached, each stamping `options` on what it enqueues."""

    def lane_queue(lane: Lane) -> JobQueue:
        # SAQ closes the client it is given on disconnect, so each lane gets its own.
        return JobQueue(
            Redis.from_url(settings.redis_url),
            name=lane_queue_name(settings.queue_name, lane),
            options=options,
            send_timeout_s=settings.send_timeout_s,
            lane=lane,
        )

    queue = lane_queue(Lane.WORK)
    for lane in Lane:
        if lane is not Lane.WORK:
            queue.attach(lane_queue(lane))
    return queue


async def enqueue(
    queue: Queue,
    name: JobName,
    *,
    key: str | None = None,
    scheduled: float = 0,
    **kwargs: Any,
) -> Job | None:
    """Enqueue job `name` with its options, in its lane; `None` means an equal key is pending."""
    lane = _configured(queue).lane_for(name.value)
    return await lane.enqueue(_job(name, key, scheduled, kwargs))


async def enqueue_many(
    queue: Queue, name: JobName, jobs: Sequence[tuple[str, Mapping[str, Any]]]
) -> int:
    """Enqueue one job `name` per `(key, kwargs)`; returns how many were new (not pending).

    SAQ enqueues one job per Redis round trip, serializing each `Job` field by field (and
    formatting a log line even when the level drops it): ~0.4 ms a job here. This runs SAQ's
    own enqueue script for every job through one pipeline instead
    (`saq_adapter.enqueue_pipelined`): the same atomic check-and-add per job, the same keys,
    with each payload made from the first job's stamped, serialized form (jobs of one name
    differ only in key, arguments and enqueue time).
    """
    if not jobs:
        return 0
    lane = _configured(queue).lane_for(name.value)
    prototype = _job(name, jobs[0][0], 0, jobs[0][1])
    return await saq_adapter.enqueue_pipelined(lane, prototype, jobs)


def _configured(queue: Queue) -> JobQueue:
    if not isinstance(queue, JobQueue):
        raise QueueNotConfiguredError(
            f"queue {queue.name!r} was not opened with the job options: open it with "
            "open_queue(settings, JOB_OPTIONS) or Resources.open(settings, jobs=JOB_OPTIONS)"
        )
    return queue


def _job(name: JobName, key: str | None, scheduled: float, kwargs: Mapping[str, Any]) -> Job:
    # Timeout and attempts are the queue's to stamp (`JobQueue._stamp`).
    return Job(
        function=name.value,
        kwargs=dict(kwargs),
        key=key or uuid.uuid4().hex,
        scheduled=int(scheduled),
    )
