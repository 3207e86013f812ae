"""enqueue_many: SAQ's own enqueue script through one pipeline; jobs as SAQ would make them."""

from __future__ import annotations

from typing import Any

from saq import Queue

from app.queue import JOB_SPECS, enqueue, enqueue_many
from app.resources import Resources
from app.settings import Settings


def _comparable(job_dict: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in job_dict.items() if k not in {"key", "kwargs", "queued"}}


async def test_jobs_are_what_saq_itself_would_enqueue_and_keys_coalesce(
    settings: Settings, resources: Resources
) -> None:
    # A fresh queue object: the first call registers SAQ's script the ordinary way.
    fresh = Queue.from_url(settings.redis_url, name=resources.queue.name)
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
            assert job.timeout == JOB_SPECS["process_comment"].timeout
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
