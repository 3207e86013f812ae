"""Retention: forget what no longer serves anyone, in bounded batches.

Expired idempotency keys can no longer answer a repeat; raw webhook bodies of events that
were fully processed are kept 30 days for investigation, then dropped; the hourly counts of
repeats absorbed (the overview shows the last 24 h) are kept a week.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import delete, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import IdempotencyHit, IdempotencyKey, WebhookEvent, WebhookStatus

WEBHOOK_RETENTION = timedelta(days=30)
HITS_RETENTION = timedelta(days=7)
BATCH = 5_000


@dataclass(frozen=True, slots=True)
class Purged:
    idempotency_keys: int
    webhook_events: int
    idempotency_hits: int = 0


async def purge_expired(session: AsyncSession) -> Purged:
    """Delete one batch of each kind; the caller commits. Run again to continue a backlog."""
    keys = await session.execute(
        delete(IdempotencyKey).where(
            IdempotencyKey.id.in_(
                select(IdempotencyKey.id).where(IdempotencyKey.expires_at < func.now()).limit(BATCH)
            )
        )
    )
    events = await session.execute(
        delete(WebhookEvent).where(
            WebhookEvent.id.in_(
                select(WebhookEvent.id)
                .where(
                    WebhookEvent.status.in_([WebhookStatus.PROCESSED, WebhookStatus.REJECTED]),
                    WebhookEvent.received_at < func.now() - WEBHOOK_RETENTION,
                )
                .limit(BATCH)
            )
        )
    )
    hits = await session.execute(
        delete(IdempotencyHit).where(
            IdempotencyHit.id.in_(
                select(IdempotencyHit.id)
                .where(IdempotencyHit.hour < func.now() - HITS_RETENTION)
                .limit(BATCH)
            )
        )
    )
    return Purged(
        idempotency_keys=getattr(keys, "rowcount", 0),
        webhook_events=getattr(events, "rowcount", 0),
        idempotency_hits=getattr(hits, "rowcount", 0),
    )
