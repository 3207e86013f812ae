"""Every job the worker runs, in one table: name, function, run options, cron schedule.

The top of the layering (its functions call into every service). Lower layers never import
it: services spell job names with `app.queue.JobName`, and each process's entry point (the
web's lifespan, the CLI, the worker, the benches, test fixtures) opens its queue with
`JOB_OPTIONS`, which the queue stamps on every job it enqueues. The worker process builds its
SAQ worker from `JOBS` and refuses to start when `registry_problems` finds any: a `JobName`
without exactly one entry, or a function SAQ would register under another name.

Delivery jobs are never retried by SAQ (`retries=1`, the default): their attempt budget lives
in the dm_logs row, where no new job id can reset it. A job that calls Meta declares how many
calls one run makes (`meta_calls`), so its timeout grows with SEND_TIMEOUT_S.

The control lane (`Lane.CONTROL`) holds the short jobs that turn arrivals into work and keep
it moving: ingest, the pacer, the relays and the sweeps. None calls Meta, none runs long, so
a worker's few control slots are free for them however deep the deliveries queue; anything
that calls Meta or may run for minutes stays in the work lane.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from app.jobs import handlers
from app.queue import JobName, JobOptions, Lane

JobFunction = Callable[..., Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class RegisteredJob:
    name: JobName
    function: JobFunction
    options: JobOptions
    # A croniter expression (a sixth field, when present, is seconds); None: enqueued on demand.
    cron: str | None = None


JOBS: tuple[RegisteredJob, ...] = (
    RegisteredJob(
        JobName.PURGE_EXPIRED, handlers.purge_expired, JobOptions(timeout=300), "17 * * * *"
    ),
    # A workspace's taps per day counted again after a change of zone: on request, and every
    # five minutes for a change whose job never reached Redis. A big account's 31 days of
    # clicks take a while, so the work lane.
    RegisteredJob(
        JobName.RECOUNT_CLICK_DAYS,
        handlers.recount_click_days,
        JobOptions(timeout=600),
        "*/5 * * * *",
    ),
    RegisteredJob(
        JobName.INGEST_EVENT,
        handlers.ingest_event,
        JobOptions(timeout=120, retries=5, retry_delay=1.0, retry_backoff=60.0, lane=Lane.CONTROL),
    ),
    # Re-enqueues stored webhook events whose ingest job never reached Redis.
    RegisteredJob(
        JobName.OUTBOX_RELAY,
        handlers.outbox_relay,
        JobOptions(timeout=60, lane=Lane.CONTROL),
        "* * * * * */20",
    ),
    # The public reply, the private reply and its plain-text fallback, and a token refresh
    # after a 190; besides them a few statements, and retrying the record for a few seconds.
    RegisteredJob(
        JobName.PROCESS_COMMENT, handlers.process_comment, JobOptions(timeout=30, meta_calls=4)
    ),
    # An account's private-reply pacer: statements and Redis scripts, no call to Meta.
    RegisteredJob(
        JobName.PACE_ACCOUNT, handlers.pace_account, JobOptions(timeout=60, lane=Lane.CONTROL)
    ),
    # DMs to a person's IGSID (app/delivery/send/dm_flow.py): button taps, DM keyword triggers
    # and follow-ups. A follow check, the message and its fallback, a token refresh.
    RegisteredJob(
        JobName.PROCESS_POSTBACK, handlers.process_postback, JobOptions(timeout=30, meta_calls=4)
    ),
    RegisteredJob(
        JobName.PROCESS_MESSAGE, handlers.process_message, JobOptions(timeout=30, meta_calls=4)
    ),
    RegisteredJob(
        JobName.SEND_FOLLOW_UP, handlers.send_follow_up, JobOptions(timeout=30, meta_calls=4)
    ),
    # Delivery safety nets (app/delivery/recovery): never retried by SAQ either. The inbox
    # check finds the conversation and reads it (and may refresh the token).
    RegisteredJob(
        JobName.VERIFY_UNCONFIRMED,
        handlers.verify_unconfirmed,
        JobOptions(timeout=30, meta_calls=3),
    ),
    RegisteredJob(
        JobName.SWEEP_STALE_CLAIMS,
        handlers.sweep_stale_claims,
        JobOptions(timeout=60, lane=Lane.CONTROL),
        "* * * * * */15",
    ),
    RegisteredJob(
        JobName.RELAY_DUE_WORK,
        handlers.relay_due_work,
        JobOptions(timeout=120, lane=Lane.CONTROL),
        "* * * * * */30",
    ),
    RegisteredJob(
        JobName.REFRESH_TOKENS, handlers.refresh_tokens, JobOptions(timeout=600), "5 5 * * *"
    ),
    # Missed-webhook recovery (app/delivery/recovery/reconcile.py). The tick, every 15 s, is
    # cheap when nothing is due: it enqueues one sweep per account due one (each account is
    # swept every RECONCILE_INTERVAL_S, and a fresh worker sweeps never-swept accounts within
    # 15 s of starting). A sweep stops reading after 200 s, so 300 s leaves time to record.
    RegisteredJob(
        JobName.RECONCILE_COMMENTS,
        handlers.reconcile_comments,
        JobOptions(timeout=60, lane=Lane.CONTROL),
        "* * * * * */15",
    ),
    RegisteredJob(JobName.RECONCILE_ACCOUNT, handlers.reconcile_account, JobOptions(timeout=300)),
    # Next-post binding and the backfill of the bound post (app/delivery/recovery/next_post.py).
    RegisteredJob(
        JobName.BIND_NEXT_POSTS, handlers.bind_next_posts, JobOptions(timeout=300), "* * * * * 30"
    ),
    # Webhook subscription self-check (app/accounts/subscriptions.py), hourly: accounts whose
    # subscription is over a day old, missing or failed last time.
    RegisteredJob(
        JobName.CHECK_WEBHOOK_SUBSCRIPTIONS,
        handlers.check_webhook_subscriptions,
        JobOptions(timeout=300),
        "41 * * * *",
    ),
)

# What each process's queue stamps on the jobs it enqueues.
JOB_OPTIONS: Mapping[JobName, JobOptions] = MappingProxyType(
    {job.name: job.options for job in JOBS}
)


def registry_problems(jobs: Iterable[RegisteredJob]) -> list[str]:
    """What would make a worker built from `jobs` drop or misroute a job; empty when none."""
    problems: list[str] = []
    seen: set[JobName] = set()
    for job in jobs:
        if job.name in seen:
            problems.append(f"job {job.name.value} is registered twice")
        seen.add(job.name)
        # SAQ finds a job's function, and enqueues a cron, by the function's __qualname__.
        if job.function.__qualname__ != job.name.value:
            problems.append(
                f"job {job.name.value} has function {job.function.__qualname__}, "
                "which SAQ would register under that other name"
            )
    problems.extend(f"job {name.value} has no entry" for name in JobName if name not in seen)
    return problems
