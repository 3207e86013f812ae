"""Job names and their run options, and the one way to enqueue them.

The web process enqueues jobs by name and never imports the worker; the worker registers a
function under each name here and refuses to start if one is missing. Every job gets an
explicit timeout and attempt budget (SAQ's defaults are 10 s and no retry). SAQ keys only
coalesce jobs while one is queued or running; the durable dedupe is in Postgres.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from saq import Job, Queue


@dataclass(frozen=True, slots=True)
class JobSpec:
    timeout: int
    retries: int = 1  # SAQ counts attempts: 1 means run once, never retried by SAQ.
    retry_delay: float = 0.0
    retry_backoff: bool | float = False
    heartbeat: int = 0
    ttl: int = 600


# Names the web and the worker agree on, with how each runs. Delivery jobs are not retried by
# SAQ: their attempt budget lives in the dm_logs row, where no new job id can reset it.
JOB_SPECS: dict[str, JobSpec] = {
    "purge_expired": JobSpec(timeout=300),
    "ingest_event": JobSpec(timeout=120, retries=5, retry_delay=1.0, retry_backoff=60.0),
    "process_comment": JobSpec(timeout=60),
    # Delivery safety nets and follow-ups (app/delivery): never retried by SAQ either.
    "verify_unconfirmed": JobSpec(timeout=60),
    "sweep_stale_claims": JobSpec(timeout=60),
    "relay_due_work": JobSpec(timeout=120),
    "refresh_tokens": JobSpec(timeout=600),
}


async def enqueue(
    queue: Queue,
    name: str,
    *,
    key: str | None = None,
    scheduled: float = 0,
    **kwargs: Any,
) -> Job | None:
    """Enqueue job `name` with its registered options; `None` means an equal key is pending."""
    spec = JOB_SPECS[name]
    job = Job(
        function=name,
        kwargs=kwargs,
        key=key or uuid.uuid4().hex,
        timeout=spec.timeout,
        retries=spec.retries,
        retry_delay=spec.retry_delay,
        retry_backoff=spec.retry_backoff,
        heartbeat=spec.heartbeat,
        ttl=spec.ttl,
        scheduled=int(scheduled),
    )
    return await queue.enqueue(job)
