"""enqueue_many: SAQ's own enqueue script through one pipeline; jobs as SAQ would make them."""

from __future__ import annotations

from typing import Any

from saq import Queue

from app.queue import JOB_SPECS, enqueue, enqueue_many, open_queue
from app.resources import Resources
from app.settings import SEND_TIMEOUT_MAX_S, Settings, load_settings


def _comparable(job_dict: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in job_dict.items() if k not in {"key", "kwargs", "queued"}}


async def test_jobs_are_what_saq_itself_would_enqueue_and_keys_coalesce(
    settings: Settings, resources: Resources
) -> None:
    # A fresh queue object: the first call registers SAQ's script the ordinary way.
    fresh = open_queue(settings)
    await fresh.connect()
    try:
        jobs = [(f"deliver:{n}", {"dm_log_id": n}) for n in range(1, 6)]
        assert await enqueue_many(fresh, "process_comment", jobs[:2]) == 2
        # Now the script is known: every job goes through the pipeline.
        assert await enqueue_many(fresh, "process_comment", jobs) == 3
        assert await enqueue_many(fresh, "process_comment", jobs) == 0
        assert await enqueue_many(fresh, "process_comment", []) == 0

        reference = await enqueue(fresh, "process_comment", key="reference", dm_log_id=99)
        assert reference is not None
        for key, kwargs in jobs:
            job = await fresh.job(key)
            assert job is not None
            assert job.kwargs == kwargs
            # Both ways stamp the timeout for this process's send timeout.
            assert job.timeout == JOB_SPECS["process_comment"].timeout_for(settings.send_timeout_s)
            assert _comparable(job.to_dict()) == _comparable(reference.to_dict())
        assert await fresh.count("queued") == 6

        dequeued = await fresh.dequeue(timeout=1)
        assert dequeued is not None
        assert (dequeued.function, dequeued.key, dequeued.kwargs) == (
            "process_comment",
            "deliver:1",
            {"dm_log_id": 1},
        )
    finally:
        await fresh.disconnect()


async def test_a_sending_job_gets_the_timeout_of_the_send_timeout_it_will_run_with(
    test_env: dict[str, str],
) -> None:
    slow = load_settings({**test_env, "SEND_TIMEOUT_S": "90", "QUEUE_NAME": "timeouts"})
    queue = open_queue(slow)
    bare = Queue.from_url(slow.redis_url, name="timeouts-bare")
    await queue.connect()
    await bare.connect()
    try:
        spec = JOB_SPECS["process_comment"]
        one = await enqueue(queue, "process_comment", key="one", dm_log_id=1)
        assert await enqueue_many(queue, "process_comment", [("two", {"dm_log_id": 2})]) == 1
        many = await queue.job("two")
        assert one is not None
        assert many is not None
        assert one.timeout == many.timeout == spec.timeout_for(90) >= 3 * 90
        # Jobs that do not call Meta keep their own timeout.
        purge = await enqueue(queue, "purge_expired")
        assert purge is not None
        assert purge.timeout == JOB_SPECS["purge_expired"].timeout
        # A queue not opened with the setting assumes the longest send timeout allowed.
        unknown = await enqueue(bare, "process_comment", key="three", dm_log_id=3)
        assert unknown is not None
        assert unknown.timeout == spec.timeout_for(SEND_TIMEOUT_MAX_S)
    finally:
        await queue.disconnect()
        await bare.disconnect()
