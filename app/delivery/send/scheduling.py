"""Enqueueing delivery work with keys that coalesce instead of piling up.

A log row's job key is derived from when it is due: `deliver:<id>` for a fresh row (the key
ingestion uses), `deliver:<id>:<epoch>` for a retry due at `epoch`. The due-work relay
computes the same key from the row, so re-enqueueing a job that is still waiting in the queue
is a no-op. Keys only coalesce while a job is queued or running; the claim in Postgres is what
makes a second run harmless.

Each trigger kind has its job (`JobName.PROCESS_COMMENT`, `PROCESS_MESSAGE`,
`PROCESS_POSTBACK`, `SEND_FOLLOW_UP`), so the queue shows what is waiting; every one of them
runs whatever row it is given through the right flow (`app.delivery.send.dispatch`), so a
caller that does not know a row's kind (the dashboard's retry) may enqueue `process_comment`
for any row.

A comment waiting for the hourly private-reply budget holds no job: its account's pacer
(`pace_account`, keyed `pace:<account id>`, `kick_pacer`) hands the free slots out and
enqueues one job per slot (`enqueue_granted`, keyed `deliver:<id>:g<grant>`); a public reply
waiting for the public replies' budget likewise (`enqueue_public_granted`,
`deliver:<id>:p<grant>`).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterable, Sequence
from datetime import datetime

from redis.exceptions import RedisError
from saq import Queue

from app.db.models import TriggerKind
from app.queue import JobName, enqueue, enqueue_many

logger = logging.getLogger("oncereply.delivery")

JOB_FOR_KIND = {
    TriggerKind.COMMENT: JobName.PROCESS_COMMENT,
    TriggerKind.MESSAGE: JobName.PROCESS_MESSAGE,
    TriggerKind.POSTBACK: JobName.PROCESS_POSTBACK,
    TriggerKind.FOLLOW_UP: JobName.SEND_FOLLOW_UP,
    # Story replies and mentions are DMs to the person's IGSID, like a DM trigger's.
    TriggerKind.STORY_REPLY: JobName.PROCESS_MESSAGE,
    TriggerKind.STORY_MENTION: JobName.PROCESS_MESSAGE,
}
# Meta needs a moment before a just-sent message shows in the conversation.
VERIFY_DELAY_S = 10.0


def delivery_key(dm_log_id: int, due: datetime | None) -> str:
    if due is None:
        return f"deliver:{dm_log_id}"
    return f"deliver:{dm_log_id}:{math.ceil(due.timestamp())}"


def job_for(kind: TriggerKind | str) -> JobName:
    return JOB_FOR_KIND[TriggerKind(kind)]


async def enqueue_delivery(
    queue: Queue,
    dm_log_id: int,
    due: datetime | None = None,
    *,
    kind: TriggerKind | str = TriggerKind.COMMENT,
) -> bool:
    """Queue the delivery job for a row (at `due`); False if Redis refused (the relay will)."""
    scheduled = math.ceil(due.timestamp()) if due is not None else 0
    try:
        await enqueue(
            queue,
            job_for(kind),
            key=delivery_key(dm_log_id, due),
            scheduled=scheduled,
            dm_log_id=dm_log_id,
        )
    except (RedisError, OSError):
        logger.warning("could not enqueue delivery %s; the due-work relay will", dm_log_id)
        return False
    return True


def pacer_key(account_id: int, at: float = 0, *, after: int | None = None) -> str:
    """`pace:<account>` now, `pace:<account>:<epoch>` later: a pacer run schedules the next
    under a key of its own, since its own key coalesces while it runs. `pace:<account>:a<row>`
    now, after the last send of a batch (row `after`'s): a key no run that granted it holds."""
    if after is not None:
        return f"pace:{account_id}:a{after}"
    return f"pace:{account_id}:{math.ceil(at)}" if at > 0 else f"pace:{account_id}"


async def kick_pacer(
    queue: Queue, account_ids: Iterable[int], *, at: float = 0, after: int | None = None
) -> int:
    """Run the pacer of each account (at epoch `at`, 0: now) unless one is already waiting;
    `after` the row whose send ended its batch (see `pacer_key`)."""
    started = 0
    for account_id in account_ids:
        try:
            job = await enqueue(
                queue,
                JobName.PACE_ACCOUNT,
                key=pacer_key(account_id, at, after=after),
                scheduled=math.ceil(at) if at > 0 else 0,
                account_id=account_id,
            )
        except (RedisError, OSError):
            logger.warning("could not start the pacer of %s; the relay will", account_id)
            continue
        started += job is not None
    return started


async def enqueue_granted(queue: Queue, grants: Sequence[tuple[int, int]]) -> int:
    """One `process_comment` job per row the pacer granted a slot: (row id, grant)."""
    jobs = [
        (f"deliver:{log_id}:g{grant}", {"dm_log_id": log_id, "grant": grant})
        for log_id, grant in grants
    ]
    return await enqueue_many(queue, JobName.PROCESS_COMMENT, jobs) if jobs else 0


async def enqueue_public_granted(queue: Queue, grants: Sequence[tuple[int, int]]) -> int:
    """One `process_comment` job per public reply the pacer granted a slot of the public
    replies' budget: (row id, grant)."""
    jobs = [
        (f"deliver:{log_id}:p{grant}", {"dm_log_id": log_id, "public_grant": grant})
        for log_id, grant in grants
    ]
    return await enqueue_many(queue, JobName.PROCESS_COMMENT, jobs) if jobs else 0


def verification_key(dm_log_id: int, again_at: float | None = None) -> str:
    """`verify:<id>` for a row's check, `verify:<id>:<epoch>` for a look it schedules again
    from inside its own job (which still holds `verify:<id>`, so SAQ would refuse that key)."""
    if again_at is None:
        return f"verify:{dm_log_id}"
    return f"verify:{dm_log_id}:{math.ceil(again_at)}"


async def enqueue_verification(
    queue: Queue,
    dm_log_id: int,
    *,
    delay_s: float = VERIFY_DELAY_S,
    now: float | None = None,
    again: bool = False,
) -> bool:
    """Queue an inbox check for an UNCONFIRMED private reply or DM; `again` for a check that
    looks again later, from inside its own job."""
    at = (now if now is not None else time.time()) + delay_s
    try:
        await enqueue(
            queue,
            JobName.VERIFY_UNCONFIRMED,
            key=verification_key(dm_log_id, at if again else None),
            scheduled=math.ceil(at) if delay_s > 0 else 0,
            dm_log_id=dm_log_id,
        )
    except (RedisError, OSError):
        logger.warning("could not enqueue the inbox check for %s", dm_log_id)
        return False
    return True
