"""Everything we use of SAQ beyond its documented API, in one place.

What reaches into SAQ's internals:

- `enqueue_pipelined`: many jobs through one Redis pipeline. It runs SAQ's own enqueue script
  (`RedisQueue._enqueue_script`, registered by SAQ's first ordinary enqueue on the queue) with
  the keys and arguments SAQ's `_enqueue` passes it (`_incomplete`, the job id, `_queued`, the
  abort id; the payload serialized by `_dump`, the scheduled time), after the queue's
  before-enqueue callbacks (`_before_enqueue`).
- `running_job_tasks` and `stop_event`: the worker's table of running jobs
  (`Worker.job_task_contexts`, each with its `task`) and the event SAQ sets when the worker
  starts stopping (`Worker.event`), for a worker that drains only jobs actually running.
- `queued_job_keys` and `pending_job_keys`: what is waiting, running or scheduled, read from
  the queue's Redis lists (`_queued`, `_incomplete`), with crons told apart by the key SAQ's
  scheduler gives them (`cron:<function>`). Tests use these.
- `held_jobs` and `requeue_held`: the jobs SAQ's workers have taken (its `_active` list, each
  job's stored payload with the `worker_id` SAQ stamps on it) and putting one of them back at
  the front of `_queued` when the worker that took it is dead. SAQ's own sweep would find
  such a job only past its timeout plus up to a minute, and abort it rather than run it
  again when it has no retries left; the requeue is one Lua script that compares the stored
  payload first, so a job that finished or was requeued meanwhile is left alone.
- `LeanRedisQueue`: SAQ's Redis queue with its `dequeue`, `_update` and `_finish` each one
  script call, using the queue's lists (`_queued`, `_active`, `_incomplete`), its `update`
  without SAQ's copy of the job, its `serialize` without looking up `Job`'s dataclass fields
  each time (`Job.to_dict`'s rules, on `Job`'s fields), and a `sweep` (SAQ's worker calls it
  every minute) that only drops ids whose payload is gone, from `_active` and `_incomplete`.

tests/integration/test_saq_adapter.py pins each of these against the installed SAQ on a
real Redis, so an upgrade that changes one fails there, naming what changed.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from redis.commands.core import AsyncScript
from saq import Job, Queue, Status, Worker
from saq.job import ABORT_ID_PREFIX
from saq.queue.redis import RedisQueue
from saq.utils import now as saq_now

# The key SAQ's scheduler gives a unique cron job: `cron:<function>`.
CRON_KEY_PREFIX = "cron:"
_PIPELINE_CHUNK = 500


async def enqueue_pipelined(
    queue: RedisQueue, prototype: Job, jobs: Sequence[tuple[str, Mapping[str, Any]]]
) -> int:
    """Enqueue one copy of `prototype` per `(key, kwargs)`; returns how many were new.

    `prototype` is the first job (its key and kwargs are `jobs[0]`'s). The queue's
    before-enqueue callbacks run once, on it; every payload is its serialized form with the
    key, arguments and enqueue time of its own job.
    """
    added, start = 0, 0
    if getattr(queue, "_enqueue_script", None) is None:
        # The ordinary way once: it also registers SAQ's enqueue script, which the pipeline
        # reuses, and sets what SAQ sets on an enqueued job.
        added, start = (0 if await queue.enqueue(prototype) is None else 1), 1
    else:
        prototype.queue, prototype.status, prototype.queued = queue, Status.QUEUED, saq_now()
        # What SAQ's enqueue runs before adding a job (the options stamp, among others).
        await queue._before_enqueue(prototype)
    script = getattr(queue, "_enqueue_script", None)
    if script is None:
        for key, kwargs in jobs[start:]:
            job = dataclasses.replace(prototype, key=key, kwargs=dict(kwargs))
            added += await queue.enqueue(job) is not None
        return added
    template = prototype.to_dict()
    for offset in range(start, len(jobs), _PIPELINE_CHUNK):
        async with queue.redis.pipeline(transaction=False) as pipe:
            for key, kwargs in jobs[offset : offset + _PIPELINE_CHUNK]:
                payload = {**template, "key": key, "kwargs": dict(kwargs), "queued": saq_now()}
                job_id, abort_id = queue.job_id(key), ABORT_ID_PREFIX + key
                await script(
                    keys=[queue._incomplete, job_id, queue._queued, abort_id],
                    args=[queue._dump(payload), 0],
                    client=pipe,
                )
            added += sum(1 for result in await pipe.execute() if result)
    return added


# Take the next waiting job and read it in one round trip. Only for a job already waiting:
# a blocking wait cannot run inside a script, so an empty queue falls back to SAQ's own
# blocking dequeue.
_TAKE_WAITING = """
local job_id = redis.call('LMOVE', KEYS[1], KEYS[2], 'LEFT', 'RIGHT')
if not job_id then return nil end
return {job_id, redis.call('GET', job_id)}
"""


# Ids in the active list whose payload is gone (expired): dropped from the active list and
# the incomplete set, as SAQ's sweep drops them; returns them.
_DROP_MISSING = """
local dropped = {}
for _, job_id in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do
    if redis.call('EXISTS', job_id) == 0 then
        redis.call('LREM', KEYS[1], 0, job_id)
        redis.call('ZREM', KEYS[2], job_id)
        table.insert(dropped, job_id)
    end
end
return dropped
"""


# A job marked with a new status: its payload stored and its listeners told, at once.
_MARK = """
redis.call('SET', KEYS[1], ARGV[1])
redis.call('PUBLISH', KEYS[1], ARGV[2])
"""

# A finished job: out of the active list and the incomplete set, its payload kept for `ttl`
# seconds (0: for ever; below 0: dropped), then its listeners told, who read the writes.
_FINISH = """
redis.call('LREM', KEYS[2], 1, KEYS[1])
redis.call('ZREM', KEYS[3], KEYS[1])
local ttl = tonumber(ARGV[2])
if ttl > 0 then
    redis.call('SETEX', KEYS[1], ttl, ARGV[1])
elseif ttl == 0 then
    redis.call('SET', KEYS[1], ARGV[1])
else
    redis.call('DEL', KEYS[1])
end
redis.call('PUBLISH', KEYS[1], ARGV[3])
"""

_JOB_FIELDS = tuple((field.name, field.default) for field in dataclasses.fields(Job))


class LeanRedisQueue(RedisQueue):
    """SAQ's Redis queue, each step of a job's life in one round trip instead of two.

    SAQ takes a job (BLMOVE, then GET), marks it active (SET, then PUBLISH) and finishes it
    (a MULTI of LREM, ZREM, SETEX, then PUBLISH): six round trips per job, each a system call
    and a wake-up of Redis on both sides. Here a waiting job is taken and read by one script
    (`_TAKE_WAITING`), and each status change is written with its notification by one script
    (`_MARK`, `_FINISH`), in SAQ's own order: three round trips, each one command for the
    client to write and one answer to read (a MULTI pipeline is six of each). What is stored,
    and what a listener is told, is what SAQ's own methods store and tell.

    SAQ's sweep aborts every job in the active list not yet marked active, and every one past
    its timeout or heartbeat. A job a live worker has just taken is in the active list, still
    marked queued, until its taker's next round trip, which a loaded machine delays: the sweep
    aborted such jobs while they ran (a delivery cancelled mid-send leaves a claim the
    stale-claim sweep calls UNCONFIRMED) and queued them again beside the first run (an
    ingest run beside another skips the events it holds, and finds nothing to do). Jobs of a
    dead worker, taken or marked, are the orphan watch's (`worker/liveness.py`); a live
    worker cancels its own job past its timeout. So the sweep here only drops ids whose
    payload is gone (`_DROP_MISSING`), which nobody can run.
    """

    def _script(self, source: str) -> AsyncScript:
        # Registered on first use and kept: registering hashes the whole text each time.
        scripts: dict[str, AsyncScript] | None = getattr(self, "_scripts", None)
        if scripts is None:
            scripts = {}
            self._scripts = scripts
        script = scripts.get(source)
        if script is None:
            script = scripts[source] = self.redis.register_script(source)
        return script

    async def sweep(self, lock: int = 60, abort: float = 5.0) -> list[str]:
        drop = self._script(_DROP_MISSING)
        dropped: list[bytes] = await drop(keys=[self._active, self._incomplete])
        return [job_id.decode() for job_id in dropped]

    async def dequeue(
        self,
        timeout: float = 0.0,  # noqa: ASYNC109 - SAQ's signature
        poll_interval: float = 0.0,
    ) -> Job | None:
        if await self.version() >= (6, 2, 0):
            take = self._script(_TAKE_WAITING)
            taken = await take(keys=[self._queued, self._active])
            if taken:
                # A payload gone between being queued and taken gives None, as SAQ's own does.
                return self.deserialize(taken[1])
        return await super().dequeue(timeout=timeout, poll_interval=poll_interval)

    async def update(self, job: Job, **kwargs: Any) -> None:
        if set(kwargs) != {"status"} or not kwargs["status"]:
            await super().update(job, **kwargs)
            return
        # SAQ's own update serializes a copy of the job (`copy`: to a dict and back); here the
        # job itself is serialized before anything is awaited, so it is the same snapshot.
        job.touched = saq_now()
        await self._update(job, kwargs["status"])

    async def _update(self, job: Job, status: Status | None = None, **kwargs: Any) -> None:
        if not status:
            await super()._update(job, status, **kwargs)
            return
        job.status = status
        mark = self._script(_MARK)
        await mark(keys=[job.id], args=[self.serialize(job), job.status])

    async def _finish(
        self, job: Job, status: Status, *, result: Any = None, error: str | None = None
    ) -> None:
        finish = self._script(_FINISH)
        # SAQ's `ttl`: seconds to keep the finished job, 0 for ever, below 0 not at all.
        payload = self.serialize(job) if job.ttl >= 0 else b""
        await finish(
            keys=[job.id, self._active, self._incomplete],
            args=[payload, job.ttl, job.status],
        )

    def serialize(self, job: Job) -> bytes | str:
        if type(job) is not Job:
            return super().serialize(job)
        return self._dump(_job_dict(job))


def _job_dict(job: Job) -> dict[str, Any]:
    """`Job.to_dict` without looking up the dataclass's fields on every call: the fields whose
    value differs from their default, the queue by its name, `meta` only when not empty."""
    result: dict[str, Any] = {}
    for name, default in _JOB_FIELDS:
        value = getattr(job, name)
        try:
            if value == default:
                continue
        except ValueError:  # a value whose == does not give a truth value (SAQ's `_safe_eq`)
            pass
        if name == "meta" and not value:
            continue
        if name == "queue" and value:
            value = value.name
        result[name] = value
    return result


def running_job_tasks(worker: Worker[Any]) -> list[asyncio.Task[Any]]:
    """The tasks of the jobs this worker is running now, not its idle loops."""
    return [c["task"] for c in worker.job_task_contexts.values() if not c["task"].done()]


def stop_event(worker: Worker[Any]) -> asyncio.Event:
    """Set when the worker starts stopping (SIGTERM, SIGINT or `stop()`): it takes no new job."""
    event: asyncio.Event = worker.event
    return event


async def queued_job_keys(queue: Queue) -> list[str]:
    """Keys of the jobs waiting to be taken now, oldest first (not running, not scheduled)."""
    redis_queue = _redis_queue(queue)
    ids = await redis_queue.redis.lrange(redis_queue._queued, 0, -1)  # type: ignore[misc]
    return [redis_queue.job_key_from_id(job_id.decode()) for job_id in ids]


async def pending_job_keys(queue: Queue, *, crons: bool = False) -> list[str]:
    """Keys of the jobs queued, running or scheduled for later, crons only if `crons`."""
    redis_queue = _redis_queue(queue)
    ids = await redis_queue.redis.zrange(redis_queue._incomplete, 0, -1)
    keys = [redis_queue.job_key_from_id(job_id.decode()) for job_id in ids]
    return [key for key in keys if crons or not key.startswith(CRON_KEY_PREFIX)]


@dataclasses.dataclass(frozen=True, slots=True)
class HeldJob:
    """A job in SAQ's active list: taken by `worker_id` (None until the taker marks it)."""

    job_id: str
    key: str
    function: str
    status: str
    worker_id: str | None
    attempts: int
    payload: bytes


async def held_jobs(queue: Queue) -> list[HeldJob]:
    """Every job some worker has taken and not finished, as stored now."""
    redis_queue = _redis_queue(queue)
    ids: list[bytes] = await redis_queue.redis.lrange(redis_queue._active, 0, -1)  # type: ignore[misc]
    if not ids:
        return []
    payloads = await redis_queue.redis.mget(ids)
    held = []
    for job_id, payload in zip(ids, payloads, strict=True):
        job = redis_queue.deserialize(payload) if payload else None
        if job is None:
            continue  # gone: the sweep drops ids whose payload expired
        held.append(
            HeldJob(
                job_id=job_id.decode(),
                key=job.key,
                function=job.function,
                status=Status(job.status).value,
                worker_id=job.worker_id,
                attempts=job.attempts,
                payload=payload,
            )
        )
    return held


_REQUEUE = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if redis.call('LREM', KEYS[2], 1, KEYS[1]) == 0 then return 0 end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('ZADD', KEYS[3], ARGV[3], KEYS[1])
redis.call('LPUSH', KEYS[4], KEYS[1])
redis.call('PUBLISH', KEYS[1], ARGV[4])
return 1
"""


async def requeue_held(queue: Queue, held: HeldJob, reason: str) -> bool:
    """Put a held job back at the front of the queue if it is still exactly as `held` saw it.

    The job keeps its attempts count (SAQ adds one when it runs again) and says why in its
    error; False when it finished, changed hands or was requeued by another worker meanwhile.
    """
    redis_queue = _redis_queue(queue)
    job = redis_queue.deserialize(held.payload)
    if job is None:
        return False
    job.status, job.error, job.touched = Status.QUEUED, reason, saq_now()
    job.started = job.completed = 0
    job.progress = 0.0
    moved = await redis_queue.redis.eval(  # type: ignore[misc]
        _REQUEUE,
        4,
        held.job_id,
        redis_queue._active,
        redis_queue._incomplete,
        redis_queue._queued,
        held.payload,
        redis_queue.serialize(job),
        job.scheduled,
        Status.QUEUED.value,
    )
    return bool(moved)


def _redis_queue(queue: Queue) -> RedisQueue:
    if not isinstance(queue, RedisQueue):
        raise TypeError(f"queue {queue.name!r} is not a SAQ Redis queue")
    return queue
