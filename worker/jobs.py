"""Job functions. Each is thin: open a session, call `app/`, commit.

A function's name is its job name (SAQ registers and schedules crons by `__qualname__`), and
every name in `app.queue.JOB_SPECS` must be here: the worker refuses to start otherwise.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from app.maintenance import retention
from worker.context import state_of

logger = logging.getLogger("oncereply.worker")

JobFunction = Callable[..., Awaitable[Any]]


async def purge_expired(ctx: dict[str, Any]) -> dict[str, int]:
    resources = state_of(ctx).resources
    async with resources.sessionmaker() as session, session.begin():
        purged = await retention.purge_expired(session)
    if purged.idempotency_keys or purged.webhook_events:
        logger.info(
            "purged %d expired idempotency keys and %d old webhook events",
            purged.idempotency_keys,
            purged.webhook_events,
        )
    return {"idempotency_keys": purged.idempotency_keys, "webhook_events": purged.webhook_events}


FUNCTIONS: list[JobFunction] = [
    purge_expired,
]

# (job name, croniter expression; a sixth field, when present, is seconds)
CRONS: list[tuple[str, str]] = [
    ("purge_expired", "17 * * * *"),
]
