"""enqueue_many: SAQ's own enqueue script through one pipeline; jobs as SAQ would make them,
with the options the queue was opened with, and never SAQ's defaults."""

from __future__ import annotations

from typing import Any

import pytest
from saq import Queue

from app.jobs.registry import JOB_OPTIONS
from app.queue import (
    JobName,
    Lane,
    QueueNotConfiguredError,
    UnknownJobError,
    WrongLaneError,
    enqueue,
    enqueue_many,
    open_queue,
)
from app.resources import Resources
from app.settings import Settings, load_settings


def _comparable(job_dict: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in job_dict.items() if k not in {"key", "kwargs", "queued"}}


async def test_jobs_are_what_saq_itself_would_enqueue_and_keys_coalesce(
    settings: Settings, resources: Resources
) -> None:
    # A fresh queue object: the first call registers SAQ's script the ordinary way.
    fresh = open_queue(settings, JOB_OPTIONS)
    await fresh.connect()
    try:
        jobs = [(f"deliver:{n}", {"dm_log_id": n}) for n in range(1, 6)]
        assert await enqueue_many(fresh, JobName.PROCESS_COMMENT, jobs[:2]) == 2
        # Now the script is known: every job goes through the pipeline.
        assert await enqueue_many(fresh, JobName.PROCESS_COMMENT, jobs) == 3
        assert await enqueue_many(fresh, JobName.PROCESS_COMMENT, jobs) == 0
        assert await enqueue_many(fresh, JobName.PROCESS_COMMENT, []) == 0

        reference = await enqueue(fresh, JobName.PROCESS_COMMENT, key="reference", dm_log_id=99)
        assert reference is not None
        options = JOB_OPTIONS[JobName.PROCESS_COMMENT]
        for key, kwargs in jobs:
            job = await fresh.job(key)
            assert job is not None
            assert job.kwargs == kwargs
            # Both ways stamp the timeout for this process's send timeout.
            assert job.timeout == options.timeout_for(settings.send_timeout_s)
            assert job.retries == 1
            assert _comparable(job.to_dict()) == _comparable(reference.to_dict())
        assert await fresh.count("queued") == 6

        dequeued = await fresh.dequeue(timeout=1)
        assert dequeued is not None
        assert (dequeued.function, dequeued.key, dequeued.kwargs) == (
            JobName.PROCESS_COMMENT,
            "deliver:1",
            {"dm_log_id": 1},
        )
    finally:
        await fresh.disconnect()


async def test_the_pipeline_stamps_every_option_of_the_job(settings: Settings) -> None:
    queue = open_queue(settings, JOB_OPTIONS)
    await queue.connect()
    try:
        # The first call goes the ordinary way, the second through the pipeline.
        assert await enqueue_many(queue, JobName.INGEST_EVENT, [("ingest:1-1", {})]) == 1
        assert await enqueue_many(queue, JobName.INGEST_EVENT, [("ingest:2-2", {})]) == 1
        options = JOB_OPTIONS[JobName.INGEST_EVENT]
        for key in ("ingest:1-1", "ingest:2-2"):
            # Ingest runs in the control lane; the work lane's queue has neither.
            assert await queue.of_lane(Lane.WORK).job(key) is None
            job = await queue.of_lane(Lane.CONTROL).job(key)
            assert job is not None
            assert (job.timeout, job.retries, job.retry_delay, job.retry_backoff, job.ttl) == (
                options.timeout,
                options.retries,
                options.retry_delay,
                options.retry_backoff,
                options.ttl,
            )
        assert options.retries > 1  # not SAQ's default, or this test would prove nothing
    finally:
        await queue.disconnect()


async def test_a_sending_job_gets_the_timeout_of_the_send_timeout_it_will_run_with(
    test_env: dict[str, str],
) -> None:
    slow = load_settings({**test_env, "SEND_TIMEOUT_S": "90", "QUEUE_NAME": "timeouts"})
    queue = open_queue(slow, JOB_OPTIONS)
    await queue.connect()
    try:
        options = JOB_OPTIONS[JobName.PROCESS_COMMENT]
        one = await enqueue(queue, JobName.PROCESS_COMMENT, key="one", dm_log_id=1)
        assert await enqueue_many(queue, JobName.PROCESS_COMMENT, [("two", {"dm_log_id": 2})]) == 1
        many = await queue.job("two")
        assert one is not None
        assert many is not None
        assert one.timeout == many.timeout == options.timeout_for(90) >= 3 * 90
        # Jobs that do not call Meta keep their own timeout.
        purge = await enqueue(queue, JobName.PURGE_EXPIRED)
        assert purge is not None
        assert purge.timeout == JOB_OPTIONS[JobName.PURGE_EXPIRED].timeout
    finally:
        await queue.disconnect()


async def test_a_queue_without_the_options_refuses_to_enqueue(settings: Settings) -> None:
    # Neither a queue opened around open_queue nor one missing a job's options may fall back
    # to SAQ's defaults (a 10 s timeout would cancel sends mid-call): both refuse, and
    # nothing reaches Redis.
    bare = Queue.from_url(settings.redis_url, name=settings.queue_name)
    partial = open_queue(settings, {JobName.PURGE_EXPIRED: JOB_OPTIONS[JobName.PURGE_EXPIRED]})
    await bare.connect()
    await partial.connect()
    try:
        with pytest.raises(QueueNotConfiguredError):
            await enqueue(bare, JobName.PROCESS_COMMENT, key="bare", dm_log_id=1)
        with pytest.raises(QueueNotConfiguredError):
            await enqueue_many(bare, JobName.PROCESS_COMMENT, [("bare-many", {"dm_log_id": 1})])
        with pytest.raises(UnknownJobError):
            await enqueue(partial, JobName.PROCESS_COMMENT, key="partial", dm_log_id=1)
        # Both ways through enqueue_many: the ordinary first call and the pipeline.
        for attempt in ("first", "pipelined"):
            with pytest.raises(UnknownJobError):
                await enqueue_many(partial, JobName.INGEST_EVENT, [(attempt, {"event_ids": [1]})])
            assert await enqueue_many(partial, JobName.PURGE_EXPIRED, [(f"ok-{attempt}", {})])
        assert await bare.count("incomplete") == 2  # the two purge jobs, nothing else
    finally:
        await bare.disconnect()
        await partial.disconnect()


async def test_a_lane_queue_refuses_a_job_of_another_lane(settings: Settings) -> None:
    # SAQ's own enqueue (as its cron scheduler calls it) on a lane's queue: a job of the other
    # lane would wait where no slot of its lane looks.
    queue = open_queue(settings, JOB_OPTIONS)
    await queue.connect()
    try:
        with pytest.raises(WrongLaneError):
            await queue.of_lane(Lane.WORK).enqueue(JobName.INGEST_EVENT.value, key="wrong")
        with pytest.raises(WrongLaneError):
            await queue.of_lane(Lane.CONTROL).enqueue(JobName.PROCESS_COMMENT.value, key="wrong")
        assert await enqueue(queue, JobName.INGEST_EVENT, key="right", event_ids=[1]) is not None
        for lane in queue.lanes:
            assert await lane.count("incomplete") == int(lane.lane is Lane.CONTROL)
    finally:
        await queue.disconnect()
