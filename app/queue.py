"""Job names and their run options, and the one way to enqueue them.

The web process enqueues jobs by name and never imports the worker; the worker registers a
function under each name here and refuses to start if one is missing. Every job gets an
explicit timeout and attempt budget (SAQ's defaults are 10 s and no retry). SAQ keys only
coalesce jobs while one is queued or running; the durable dedupe is in Postgres.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from saq import Job, Queue, Status
from saq.job import ABORT_ID_PREFIX
from saq.queue.redis import RedisQueue
from saq.utils import now as saq_now

_PIPELINE_CHUNK = 500


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
    # DMs to a person's IGSID (app/delivery/dm_flow.py): button taps, DM keyword triggers and
    # follow-ups. A follow check plus two sends fit well inside 60 s.
    "process_postback": JobSpec(timeout=60),
    "process_message": JobSpec(timeout=60),
    "send_follow_up": JobSpec(timeout=60),
    # Delivery safety nets and follow-ups (app/delivery): never retried by SAQ either.
    "verify_unconfirmed": JobSpec(timeout=60),
    "sweep_stale_claims": JobSpec(timeout=60),
    "relay_due_work": JobSpec(timeout=120),
    "refresh_tokens": JobSpec(timeout=600),
    # Re-enqueues stored webhook events whose ingest job never reached Redis.
    "outbox_relay": JobSpec(timeout=60),
    # Missed-webhook recovery (app/delivery/reconcile.py): the cron tick enqueues one sweep per
    # due account; a sweep stops reading after 200 s, so 300 s leaves time to record.
    "reconcile_comments": JobSpec(timeout=60),
    "reconcile_account": JobSpec(timeout=300),
    # Next-post binding and the backfill of the bound post (app/campaigns/next_post.py).
    "bind_next_posts": JobSpec(timeout=300),
    # Webhook subscription self-check (app/instagram/subscriptions.py).
    "check_webhook_subscriptions": JobSpec(timeout=300),
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
    return await queue.enqueue(_job(name, key, scheduled, kwargs))


async def enqueue_many(
    queue: Queue, name: str, jobs: Sequence[tuple[str, Mapping[str, Any]]]
) -> int:
    """Enqueue one job `name` per `(key, kwargs)`; returns how many were new (not pending).

    SAQ enqueues one job per Redis round trip, serializing each `Job` field by field (and
    formatting a log line even when the level drops it): ~0.4 ms a job here. On Redis this
    runs SAQ's own enqueue script for every job through one pipeline instead — the same atomic
    check-and-add per job, the same keys — with each payload made from the first job's
    serialized form (jobs of one name differ only in key, arguments and enqueue time).
    """
    if not jobs:
        return 0
    prototype = _job(name, jobs[0][0], 0, jobs[0][1])
    added, start = 0, 0
    if getattr(queue, "_enqueue_script", None) is None:
        # The ordinary way once: it also registers SAQ's enqueue script, which the pipeline
        # reuses, and sets what SAQ sets on an enqueued job.
        added, start = (0 if await queue.enqueue(prototype) is None else 1), 1
    else:
        prototype.queue, prototype.status, prototype.queued = queue, Status.QUEUED, saq_now()
    script = getattr(queue, "_enqueue_script", None)
    if not isinstance(queue, RedisQueue) or script is None:
        for key, kwargs in jobs[start:]:
            added += await queue.enqueue(_job(name, key, 0, kwargs)) is not None
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


def _job(name: str, key: str | None, scheduled: float, kwargs: Mapping[str, Any]) -> Job:
    spec = JOB_SPECS[name]
    return Job(
        function=name,
        kwargs=dict(kwargs),
        key=key or uuid.uuid4().hex,
        timeout=spec.timeout,
        retries=spec.retries,
        retry_delay=spec.retry_delay,
        retry_backoff=spec.retry_backoff,
        heartbeat=spec.heartbeat,
        ttl=spec.ttl,
        scheduled=int(scheduled),
    )
