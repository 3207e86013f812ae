"""Retention: forget what no longer serves anyone, in bounded batches.

Expired idempotency keys can no longer answer a repeat; raw webhook bodies of events that
were fully processed are kept 30 days for investigation, then dropped; the hourly counts of
repeats absorbed (the overview shows the last 24 h) are kept a week. The people who tapped a
link each day (`link_click_days`) and who they were (`link_click_day_people`, which only keeps
a person from counting twice in a day) are kept for the days the funnel shows and a change of
zone counts again (the last 31 local days, `app.clicks.day_recount`), a day to spare for a
zone ahead of UTC: no page or recount reads an older day, and a click older than that, copied
late, could only count again on a day no page shows (and is forgotten with it). The taps kept
per 15-minute slice (`link_click_quarters`) serve only the charts' hours that a local bucket
starts inside (`app.delivery_log.charts`), whose longest range is the last 30 local days: a
slice is kept 32 days, the same horizon, more than those 30 days plus the hour a change of
daylight saving time adds. The other kept counts of taps (per hour, per person) hold a
campaign's totals and stay.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import delete, func, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import (
    IdempotencyHit,
    IdempotencyKey,
    WebhookEvent,
    WebhookStatus,
)

WEBHOOK_RETENTION = timedelta(days=30)
HITS_RETENTION = timedelta(days=7)
# Days before today in UTC: every zone's day 31 days back is on or after it.
CLICK_DAYS_KEPT_DAYS = 32
BATCH = 5_000
# A slice is kept as long as the days are: the charts' 30 local days never reach that far back.
CLICK_QUARTERS_RETENTION = timedelta(days=CLICK_DAYS_KEPT_DAYS)
# Slices have no index led by their time: each workspace's old ones are one range of
# `ix_link_click_quarters_ws_quarter` (workspace, quarter), a batch in all.
_OLD_QUARTERS = text(
    """
DELETE FROM link_click_quarters q
USING (
    SELECT o.campaign_id, o.quarter, o.button FROM workspaces w
    CROSS JOIN LATERAL (
        SELECT campaign_id, quarter, button FROM link_click_quarters
        WHERE workspace_id = w.id AND quarter < now() - :kept
        LIMIT :batch
    ) o
    LIMIT :batch
) old
WHERE q.campaign_id = old.campaign_id AND q.quarter = old.quarter AND q.button = old.button
"""
)
# The days' tables have no index led by the day either: each campaign's old days are one range
# of the primary key (campaign, day[, person]), a batch in all, rather than a scan of the table
# every hour for the few rows a day makes old.
_UTC_BEFORE = "CAST(timezone('UTC', now()) AS date) - :kept_days"
_OLD_DAY_PEOPLE = text(
    f"""
DELETE FROM link_click_day_people p
USING (
    SELECT o.campaign_id, o.day, o.recipient_id FROM campaigns c
    CROSS JOIN LATERAL (
        SELECT campaign_id, day, recipient_id FROM link_click_day_people
        WHERE campaign_id = c.id AND day < {_UTC_BEFORE}
        LIMIT :batch
    ) o
    LIMIT :batch
) old
WHERE p.campaign_id = old.campaign_id AND p.day = old.day AND p.recipient_id = old.recipient_id
"""  # noqa: S608 - module constants only; every value is a bound parameter
)
_OLD_DAYS = text(
    f"""
DELETE FROM link_click_days d
USING (
    SELECT o.campaign_id, o.day FROM campaigns c
    CROSS JOIN LATERAL (
        SELECT campaign_id, day FROM link_click_days
        WHERE campaign_id = c.id AND day < {_UTC_BEFORE}
        LIMIT :batch
    ) o
    LIMIT :batch
) old
WHERE d.campaign_id = old.campaign_id AND d.day = old.day
"""  # noqa: S608 - module constants only; every value is a bound parameter
)


@dataclass(frozen=True, slots=True)
class Purged:
    idempotency_keys: int
    webhook_events: int
    idempotency_hits: int = 0
    link_click_day_people: int = 0
    link_click_days: int = 0
    link_click_quarters: int = 0


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
    old_days = {"kept_days": CLICK_DAYS_KEPT_DAYS, "batch": BATCH}
    day_people = await session.execute(_OLD_DAY_PEOPLE, old_days)
    days = await session.execute(_OLD_DAYS, old_days)
    quarters = await session.execute(
        _OLD_QUARTERS, {"kept": CLICK_QUARTERS_RETENTION, "batch": BATCH}
    )
    return Purged(
        idempotency_keys=getattr(keys, "rowcount", 0),
        webhook_events=getattr(events, "rowcount", 0),
        idempotency_hits=getattr(hits, "rowcount", 0),
        link_click_day_people=getattr(day_people, "rowcount", 0),
        link_click_days=getattr(days, "rowcount", 0),
        link_click_quarters=getattr(quarters, "rowcount", 0),
    )
