"""The charts' numbers: DMs sent, failed, unconfirmed and skipped, and link taps, over time.

Two ranges (`Span`): the last 24 hours by hour, the last 30 days by day, both bucketed in the
workspace's time zone (PostgreSQL's `AT TIME ZONE` with the zone's IANA name), the current
hour or day last. Deliveries count by the bucket they were created in and their state now,
as the overview's "today" does, summed from the counts kept per 15-minute UTC slice
(`delivery_workspace_quarters` for the workspace, `delivery_counts` for a campaign); taps by
the moment of the tap (a person's visits only, not preview fetches), summed from the counts
kept per UTC hour (`link_click_hours`), and for an hour a bucket starts inside (`split_hours`)
from that hour's counts kept per 15-minute slice (`link_click_quarters`); no raw click is read.

One grouped statement per table over an index range: `pk_delivery_workspace_quarters` or
`uq_delivery_counts_key`; `ix_link_click_hours_ws_hour` or `pk_link_click_hours` (and
`ix_link_click_quarters_ws_quarter` or `pk_link_click_quarters` for a split hour).
The statements are `_DELIVERIES_*` and `_TAPS_*`, whole workspace or one campaign.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta, tzinfo
from enum import StrEnum
from typing import Any

from sqlalchemy import TextClause, text
from sqlalchemy.ext.asyncio import AsyncSession

from app.delivery_log.funnel import zone_key
from app.delivery_log.kept_counts import SKIPPED


class Span(StrEnum):
    HOURS = "24h"
    DAYS = "30d"

    @property
    def words(self) -> str:
        return "Last 24 hours" if self is Span.HOURS else "Last 30 days"


def parse_span(value: str | None, default: Span = Span.DAYS) -> Span:
    """The range a query string asks for; anything else is the default (never an error)."""
    try:
        return Span(value or default)
    except ValueError:
        return default


# Deliveries from the kept counts, a row per 15-minute UTC slice (a bucket of any zone is a
# whole number of slices): the workspace's own slices (`delivery_workspace_quarters`, one row
# each) or the campaign's (`delivery_counts`).
_DELIVERIES_SELECT = f"""
SELECT date_trunc(:unit, quarter AT TIME ZONE :tz) AS bucket,
       sum(sent) AS sent, sum(failed) AS failed, sum(unconfirmed) AS unconfirmed,
       sum({SKIPPED}) AS skipped
"""
_DELIVERIES_WORKSPACE = text(
    _DELIVERIES_SELECT
    + "FROM delivery_workspace_quarters"
    + " WHERE workspace_id = :workspace_id AND quarter >= :start GROUP BY 1"
)
_DELIVERIES_CAMPAIGN = text(
    _DELIVERIES_SELECT
    + "FROM delivery_counts"
    + " WHERE workspace_id = :workspace_id AND campaign_id = :campaign_id"
    + " AND quarter >= :start GROUP BY 1"
)
# Taps from the kept counts per UTC hour (`link_click_hours`), but for the hours a bucket
# starts inside (a zone half or three quarters of an hour off UTC): those are summed from
# the hour's 15-minute slices (`link_click_quarters`), so every tap lands in its own local
# bucket. In a whole-hour zone `:split` is empty and the statement sums the hour rows alone
# (a 30-day range has about 2.5 times as many slice rows as hour rows).
_TAPS = """
SELECT bucket, sum(taps) AS taps FROM (
    SELECT date_trunc(:unit, hour AT TIME ZONE :tz) AS bucket, taps
    FROM link_click_hours
    WHERE workspace_id = :workspace_id {campaign} AND hour >= :start_hour
      AND hour <> ALL(CAST(:split AS timestamptz[]))
    UNION ALL
    SELECT date_trunc(:unit, q.quarter AT TIME ZONE :tz), q.taps
    FROM unnest(CAST(:split AS timestamptz[])) AS s(hour)
    -- One index range per split hour (OFFSET 0 keeps the planner from making it one join
    -- over every slice of the workspace or campaign).
    CROSS JOIN LATERAL (
        SELECT quarter, taps FROM link_click_quarters
        WHERE {raw_campaign} workspace_id = :workspace_id
          AND quarter >= s.hour AND quarter < s.hour + interval '1 hour'
        OFFSET 0
    ) q
) taps
GROUP BY 1
"""
_TAPS_WORKSPACE = text(_TAPS.format(campaign="", raw_campaign=""))
_TAPS_CAMPAIGN = text(
    _TAPS.format(
        campaign="AND campaign_id = :campaign_id", raw_campaign="campaign_id = :campaign_id AND"
    )
)


def split_hours(starts: list[datetime]) -> list[datetime]:
    """The UTC hours that a bucket starting at one of `starts` (aware) cuts in two."""
    cut = {
        start.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
        for start in starts
        if start.astimezone(UTC).minute or start.astimezone(UTC).second
    }
    return sorted(cut)


@dataclass(frozen=True, slots=True)
class Timeline:
    """Counts per bucket, oldest first; `buckets` are local wall-clock starts."""

    span: Span
    zone: str
    buckets: list[datetime]
    sent: list[int]
    failed: list[int]
    unconfirmed: list[int]
    skipped: list[int]
    taps: list[int]

    @property
    def spans(self) -> list[Span]:
        return list(Span)

    @property
    def labels(self) -> list[str]:
        fmt = "%H:00" if self.span is Span.HOURS else "%d %b"
        return [bucket.strftime(fmt) for bucket in self.buckets]

    @property
    def rows(self) -> list[tuple[str, int, int, int, int, int]]:
        """The data table: one row per bucket, newest first."""
        fmt = "%a %H:00" if self.span is Span.HOURS else "%a %d %b"
        return [
            (bucket.strftime(fmt), *values)
            for bucket, *values in reversed(
                list(
                    zip(
                        self.buckets,
                        self.sent,
                        self.failed,
                        self.unconfirmed,
                        self.skipped,
                        self.taps,
                        strict=True,
                    )
                )
            )
        ]

    def total(self, name: str) -> int:
        values: list[int] = getattr(self, name)
        return sum(values)


def buckets_for(span: Span, zone: tzinfo, now: datetime) -> list[datetime]:
    """The local, naive starts of the span's buckets, oldest first, the current one last."""
    if span is Span.HOURS:
        # The current local hour (a zone half an hour off UTC starts its hours at :30 UTC),
        # then whole hours back from it; a wall-clock hour lived twice is one bucket.
        hour = now.astimezone(zone).replace(minute=0, second=0, microsecond=0).astimezone(UTC)
        starts = [(hour - timedelta(hours=23 - i)).astimezone(zone) for i in range(24)]
        return list(dict.fromkeys(start.replace(tzinfo=None) for start in starts))
    today = now.astimezone(zone).date()
    return [datetime.combine(today - timedelta(days=29 - i), time.min) for i in range(30)]


async def timeline(
    session: AsyncSession,
    *,
    workspace_id: int,
    campaign_id: int | None = None,
    span: Span,
    zone: tzinfo,
    now: datetime,
) -> Timeline:
    """The chart's series for the workspace, or for one of its campaigns."""
    buckets = buckets_for(span, zone, now)
    params: dict[str, Any] = {
        "workspace_id": workspace_id,
        "campaign_id": campaign_id,
        "unit": "hour" if span is Span.HOURS else "day",
        "tz": zone_key(zone),
        "start": buckets[0].replace(tzinfo=zone),
    }
    starts = [bucket.replace(tzinfo=zone) for bucket in buckets]
    params["split"] = split_hours(starts)
    params["start_hour"] = starts[0].astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    deliveries: TextClause = _DELIVERIES_CAMPAIGN if campaign_id else _DELIVERIES_WORKSPACE
    taps: TextClause = _TAPS_CAMPAIGN if campaign_id else _TAPS_WORKSPACE
    index = {bucket: i for i, bucket in enumerate(buckets)}
    series: dict[str, list[int]] = {
        name: [0] * len(buckets) for name in ("sent", "failed", "unconfirmed", "skipped", "taps")
    }
    for row in (await session.execute(deliveries, params)).all():
        at = index.get(row.bucket)
        if at is not None:
            for name in ("sent", "failed", "unconfirmed", "skipped"):
                series[name][at] += int(getattr(row, name))
    for row in (await session.execute(taps, params)).all():
        at = index.get(row.bucket)
        if at is not None:
            series["taps"][at] += int(row.taps)
    return Timeline(span=span, zone=zone_key(zone), buckets=buckets, **series)
