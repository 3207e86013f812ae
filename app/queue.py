"""Job names and their run options, and the one way to enqueue them.

The web process enqueues jobs by name and never imports the worker; the worker registers a
function under each name here and refuses to start if one is missing. Every job gets an
explicit timeout and attempt budget (SAQ's defaults are 10 s and no retry). SAQ keys only
coalesce jobs while one is queued or running; the durable dedupe is in Postgres.

A job that calls Meta gets a timeout that grows with SEND_TIMEOUT_S, the bound of each call
(`JobSpec.timeout_for`): SAQ cancels a job past its timeout, and its sweep aborts one it finds
running past it, and either in the middle of a send would leave a claim for the stale-claim
sweep to call UNCONFIRMED although the send would have finished. The timeout is stamped when
the job is enqueued, so every queue is opened with `open_queue`, which knows the setting; a
queue opened otherwise stamps the timeout for the longest send timeout allowed.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from saq import Job, Queue, Status
from saq.job import ABORT_ID_PREFIX
from saq.queue.redis import RedisQueue
from saq.utils import now as saq_now

from app.settings import SEND_TIMEOUT_MAX_S, Settings

_PIPELINE_CHUNK = 500


@dataclass(frozen=True, slots=True)
class JobSpec:
    # Seconds; for a job that calls Meta, what it needs besides those calls.
    timeout: int
    retries: int = 1  # SAQ counts attempts: 1 means run once, never retried by SAQ.
    retry_delay: float = 0.0
    retry_backoff: bool | float = False
    heartbeat: int = 0
    ttl: int = 600
    # The most calls to Meta one run makes, each allowed up to the send timeout.
    meta_calls: int = 0

    def timeout_for(self, send_timeout_s: float) -> int:
        return self.timeout + math.ceil(self.meta_calls * send_timeout_s)


# Names the web and the worker agree on, with how each runs. Delivery jobs are not retried by
# SAQ: their attempt budget lives in the dm_logs row, where no new job id can reset it.
JOB_SPECS: dict[str, JobSpec] = {
    "purge_expired": JobSpec(timeout=300),
    "ingest_event": JobSpec(timeout=120, retries=5, retry_delay=1.0, retry_backoff=60.0),
    # The public reply, the private reply and its plain-text fallback, and a token refresh
    # after a 190; besides them a few statements, and retrying the record for a few seconds.
    "process_comment": JobSpec(timeout=30, meta_calls=4),
    # DMs to a person's IGSID (app/delivery/send/dm_flow.py): button taps, DM keyword triggers and
    # follow-ups. A follow check, the message and its fallback, a token refresh.
    "process_postback": JobSpec(timeout=30, meta_calls=4),
    "process_message": JobSpec(timeout=30, meta_calls=4),
    "send_follow_up": JobSpec(timeout=30, meta_calls=4),
    # Delivery safety nets (app/delivery): never retried by SAQ either. The inbox check finds
    # the conversation and reads it (and may refresh the token).
    "verify_unconfirmed": JobSpec(timeout=30, meta_calls=3),
    "sweep_stale_claims": JobSpec(timeout=60),
    "relay_due_work": JobSpec(timeout=120),
    "refresh_tokens": JobSpec(timeout=600),
    # Re-enqueues stored webhook events whose ingest job never reached Redis.
    "outbox_relay": JobSpec(timeout=60),
    # Missed-webhook recovery (app/delivery/recovery/reconcile.py): the cron tick enqueues one
    # sweep per due account; a sweep stops reading after 200 s, so 300 s leaves time to record.
    "reconcile_comments": JobSpec(timeout=60),
    "reconcile_account": JobSpec(timeout=300),
    # Next-post binding and the backfill of the bound post (app/delivery/recovery/next_post.py).
    "bind_next_posts": JobSpec(timeout=300),
    # Webhook subscription self-check (app/accounts/subscriptions.py).
    "check_webhook_subscriptions": JobSpec(timeout=300),
}


def open_queue(settings: Settings) -> Queue:
    """The process's job queue, stamping each job it enqueues with the timeout for this
    process's send timeout (the worker that runs it is configured alike)."""
    queue = Queue.from_url(settings.redis_url, name=settings.queue_name)
    send_timeout_s = settings.send_timeout_s

    async def stamp_timeout(job: Job) -> None:
        spec = JOB_SPECS.get(job.function)
        if spec is not None and spec.meta_calls:
            job.timeout = spec.timeout_for(send_timeout_s)

    queue.register_before_enqueue(stamp_timeout)
    return queue


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
        # What SAQ's enqueue runs before adding a job (`open_queue`'s timeout stamp).
        await queue._before_enqueue(prototype)
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
        # `open_queue` stamps the timeout for the actual send timeout.
        timeout=spec.timeout_for(SEND_TIMEOUT_MAX_S),
        retries=spec.retries,
        retry_delay=spec.retry_delay,
        retry_backoff=spec.retry_backoff,
        heartbeat=spec.heartbeat,
        ttl=spec.ttl,
        scheduled=int(scheduled),
    )
