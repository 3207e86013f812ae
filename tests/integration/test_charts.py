"""The charts' numbers agree with the rows, bucketed in the workspace's zone; the overview and
the campaign page draw them, and the range switch answers with the charts alone for htmx."""

from __future__ import annotations

import hashlib
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, time, timedelta
from itertools import count
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy import text, update

from app.clicks.recorder import SpooledClick, copy_clicks
from app.clicks.visitors import Visit
from app.db.models import LegState, LinkVisit, Workspace
from app.delivery_log.charts import Span, Timeline, timeline
from app.maintenance import retention
from app.resources import Resources
from app.settings import Settings
from tests.support.log_data import Creator, add_campaign, add_log, signed_in_creator

TOKYO = ZoneInfo("Asia/Tokyo")
_keys = count(1)


@pytest.fixture
async def owner(settings: Settings, resources: Resources) -> AsyncIterator[Creator]:
    async with signed_in_creator(settings, resources) as creator:
        async with resources.sessionmaker() as session, session.begin():
            await session.execute(
                update(Workspace)
                .where(Workspace.id == creator.workspace_id)
                .values(time_zone="Asia/Tokyo")
            )
        yield creator


async def tap(resources: Resources, log_id: int, at: datetime, visit: LinkVisit) -> None:
    """A visit recorded as the redirect's copier records it (the row and the kept counts)."""
    await copy_clicks(
        resources.engine,
        [
            SpooledClick(
                key=hashlib.sha256(f"chart:{next(_keys)}".encode()).digest()[:16],
                dm_log_id=log_id,
                button=0,
                visit=Visit(visit.value),
                at=at,
            )
        ],
    )


async def seed(resources: Resources, owner: Creator, now: datetime) -> dict[str, datetime]:
    at = {
        "now": now,
        "earlier": now - timedelta(hours=2),
        "days_ago": now - timedelta(days=3),
        "long_ago": now - timedelta(days=40),
    }
    sent = await add_log(resources, owner, state=LegState.SENT, created_at=at["now"])
    await add_log(resources, owner, state=LegState.FAILED, created_at=at["now"])
    await add_log(resources, owner, state=LegState.UNCONFIRMED, created_at=at["now"])
    await add_log(resources, owner, state=LegState.SKIPPED_DEDUP, created_at=at["earlier"])
    await add_log(resources, owner, state=LegState.SENT, created_at=at["days_ago"])
    await add_log(resources, owner, state=LegState.SENT, created_at=at["long_ago"])
    other = await add_campaign(resources, owner.workspace_id, owner.account_id, "Bread")
    await add_log(resources, owner, state=LegState.SENT, created_at=at["now"], campaign_id=other)
    await tap(resources, sent, at["now"], LinkVisit.CLICK)
    await tap(resources, sent, at["days_ago"], LinkVisit.CLICK)
    await tap(resources, sent, at["now"], LinkVisit.PREVIEW)
    return at


def index_of(chart: Timeline, moment: datetime) -> int:
    local = moment.astimezone(TOKYO).replace(tzinfo=None)
    if chart.span is Span.HOURS:
        key = local.replace(minute=0, second=0, microsecond=0)
    else:
        key = local.replace(hour=0, minute=0, second=0, microsecond=0)
    return chart.buckets.index(key)


async def chart_of(
    resources: Resources, owner: Creator, span: Span, now: datetime, campaign: int | None = None
) -> Timeline:
    async with resources.sessionmaker() as session:
        return await timeline(
            session,
            workspace_id=owner.workspace_id,
            campaign_id=campaign,
            span=span,
            zone=TOKYO,
            now=now,
        )


def nonzero(chart: Timeline, name: str) -> dict[int, int]:
    return {i: v for i, v in enumerate(getattr(chart, name)) if v}


async def test_the_charts_agree_with_the_rows(resources: Resources, owner: Creator) -> None:
    now = datetime.now(UTC)
    at = await seed(resources, owner, now)

    hours = await chart_of(resources, owner, Span.HOURS, now, owner.campaign_id)
    assert len(hours.buckets) == 24
    here, earlier = index_of(hours, at["now"]), index_of(hours, at["earlier"])
    assert here == 23
    assert nonzero(hours, "sent") == {here: 1}
    assert nonzero(hours, "failed") == {here: 1}
    assert nonzero(hours, "unconfirmed") == {here: 1}
    assert nonzero(hours, "skipped") == {earlier: 1}
    assert nonzero(hours, "taps") == {here: 1}

    days = await chart_of(resources, owner, Span.DAYS, now, owner.campaign_id)
    today, before = index_of(days, at["now"]), index_of(days, at["days_ago"])
    assert today == 29
    assert nonzero(days, "sent") == {today: 1, before: 1}  # not the one 40 days ago
    assert nonzero(days, "taps") == {today: 1, before: 1}  # the preview fetch is no tap
    assert days.total("skipped") == 1

    # The whole workspace: the other campaign's DM too.
    workspace = await chart_of(resources, owner, Span.DAYS, now)
    assert nonzero(workspace, "sent") == {today: 2, before: 1}


@pytest.mark.parametrize("zone_name", ["Asia/Kolkata", "Asia/Kathmandu"])
async def test_taps_land_in_their_local_bucket_off_the_utc_hour(
    resources: Resources, owner: Creator, zone_name: str
) -> None:
    """India's days and hours start at :30 UTC, Nepal's at :45, inside UTC hours: taps either
    side of such a start (kept per 15-minute slice) still land on their own side."""
    kolkata = ZoneInfo(zone_name)
    now = datetime.now(UTC)
    row = await add_log(resources, owner, state=LegState.SENT, created_at=now - timedelta(days=3))
    midnight = datetime.combine(
        now.astimezone(kolkata).date() - timedelta(days=2), time.min, kolkata
    )
    hour = now.astimezone(kolkata).replace(minute=0, second=0, microsecond=0) - timedelta(hours=3)
    moments = [
        midnight - timedelta(minutes=10),
        midnight + timedelta(minutes=10),
        midnight + timedelta(hours=5),  # a whole UTC hour, from the kept counts alone
        hour - timedelta(minutes=10),
        hour + timedelta(minutes=10),
    ]
    for moment in moments:
        await tap(resources, row, moment, LinkVisit.CLICK)

    def local(moment: datetime, unit: str) -> datetime:
        at = moment.astimezone(kolkata).replace(tzinfo=None, minute=0, second=0, microsecond=0)
        return at.replace(hour=0) if unit == "day" else at

    async with resources.sessionmaker() as session:
        for span, unit in ((Span.DAYS, "day"), (Span.HOURS, "hour")):
            chart = await timeline(
                session,
                workspace_id=owner.workspace_id,
                campaign_id=owner.campaign_id,
                span=span,
                zone=kolkata,
                now=now,
            )
            expected: dict[int, int] = {}
            for moment in moments:
                key = local(moment, unit)
                if key in chart.buckets:
                    at = chart.buckets.index(key)
                    expected[at] = expected.get(at, 0) + 1
            assert nonzero(chart, "taps") == expected
            assert len(expected) >= 2  # both sides of a start that falls inside a UTC hour


def chart_totals(html: str, figure: str) -> dict[str, str]:
    part = html[html.index(f'id="{figure}"') :]
    part = part[: part.index("</figure>")]
    return dict(re.findall(r'<strong class="n-(\w+)">(\d+)</strong>', part))


async def test_the_overview_draws_the_charts_with_a_range_switch(
    resources: Resources, owner: Creator
) -> None:
    await seed(resources, owner, datetime.now(UTC))
    page = await owner.client.get("/")
    assert page.status_code == 200
    html = page.text
    assert '<svg class="chart" id="chart-deliveries"' in html
    assert 'role="img"' in html
    # The overview opens on the last 24 hours (it refreshes itself every 10 s).
    assert chart_totals(html, "chart-deliveries-figure") == {
        "sent": "2",
        "failed": "1",
        "unconfirmed": "1",
        "skipped": "1",
    }
    assert chart_totals(html, "chart-taps-figure") == {"taps": "1"}
    assert re.search(r'data-range="24h" class="active" aria-current="true"', html)
    assert 'hx-get="/?range=24h" hx-trigger="every 10s"' in html

    month = await owner.client.get("/?range=30d", headers={"HX-Request": "true"})
    assert month.status_code == 200
    assert month.text.lstrip().startswith('<div id="overview" hx-get="/?range=30d"')
    assert chart_totals(month.text, "chart-deliveries-figure")["sent"] == "3"
    assert chart_totals(month.text, "chart-taps-figure") == {"taps": "2"}

    unknown = await owner.client.get("/?range=1y")
    assert unknown.status_code == 200
    assert 'data-range="24h" class="active"' in unknown.text


async def test_the_campaign_range_switch_answers_with_the_charts_alone(
    resources: Resources, owner: Creator
) -> None:
    await seed(resources, owner, datetime.now(UTC))
    url = f"/campaigns/{owner.campaign_id}"
    page = await owner.client.get(url)
    assert page.status_code == 200
    assert 'id="campaign-charts"' in page.text
    assert '<svg class="chart" id="chart-funnel"' in page.text
    assert chart_totals(page.text, "chart-deliveries-figure")["sent"] == "2"

    partial = await owner.client.get(
        f"{url}?range=24h", headers={"HX-Request": "true", "HX-Target": "campaign-charts"}
    )
    assert partial.status_code == 200
    assert partial.text.lstrip().startswith('<section class="card charts" id="campaign-charts"')
    assert "<form" not in partial.text
    assert f'hx-get="{url}?range=30d"' in partial.text
    assert 'data-range="24h" class="active"' in partial.text
    assert chart_totals(partial.text, "chart-deliveries-figure")["sent"] == "1"

    # Without JavaScript the same link is the whole page, with that range.
    whole = await owner.client.get(f"{url}?range=24h")
    assert "<form" in whole.text
    assert 'data-range="24h" class="active"' in whole.text


@pytest.mark.parametrize("zone_name", ["Asia/Kolkata", "Asia/Kathmandu"])
async def test_deliveries_land_in_their_local_bucket_off_the_utc_hour(
    resources: Resources, owner: Creator, zone_name: str
) -> None:
    """India's hours start at :30 UTC, Nepal's at :15: deliveries either side of such a start,
    counted in 15-minute slices, land on their own side, by day and by hour."""
    zone = ZoneInfo(zone_name)
    now = datetime.now(UTC)
    midnight = datetime.combine(now.astimezone(zone).date() - timedelta(days=2), time.min, zone)
    hour = now.astimezone(zone).replace(minute=0, second=0, microsecond=0) - timedelta(hours=3)
    moments = [
        midnight - timedelta(minutes=1),
        midnight,
        midnight + timedelta(minutes=14),
        hour - timedelta(seconds=1),
        hour + timedelta(minutes=1),
        hour + timedelta(minutes=59),
    ]
    for moment in moments:
        await add_log(resources, owner, state=LegState.SENT, created_at=moment)

    def local(moment: datetime, unit: str) -> datetime:
        at = moment.astimezone(zone).replace(tzinfo=None, minute=0, second=0, microsecond=0)
        return at.replace(hour=0) if unit == "day" else at

    async with resources.sessionmaker() as session:
        for span, unit in ((Span.DAYS, "day"), (Span.HOURS, "hour")):
            for campaign in (owner.campaign_id, None):
                chart = await timeline(
                    session,
                    workspace_id=owner.workspace_id,
                    campaign_id=campaign,
                    span=span,
                    zone=zone,
                    now=now,
                )
                expected: dict[int, int] = {}
                for moment in moments:
                    key = local(moment, unit)
                    if key in chart.buckets:
                        at = chart.buckets.index(key)
                        expected[at] = expected.get(at, 0) + 1
                assert nonzero(chart, "sent") == expected
                assert len(expected) >= 2  # both sides of a start inside a UTC hour


async def test_retention_forgets_tap_slices_older_than_any_chart_shows(
    resources: Resources, owner: Creator
) -> None:
    """The taps kept per 15-minute slice go once they are older than the oldest slice a
    30-day chart reads in any zone (its first local midnight, in zones from UTC-11 to UTC+14
    and one 45 minutes off the hour); the chart shows what it showed."""
    kathmandu = ZoneInfo("Asia/Kathmandu")
    now = datetime.now(UTC)
    row = await add_log(resources, owner, state=LegState.SENT, created_at=now - timedelta(days=3))
    first_midnights = [
        datetime.combine(now.astimezone(zone).date() - timedelta(days=29), time.min, zone)
        for zone in (ZoneInfo("Pacific/Kiritimati"), ZoneInfo("Pacific/Pago_Pago"), kathmandu)
    ]
    kept = [*first_midnights, now - timedelta(days=2), now]
    old = [now - timedelta(days=33), now - timedelta(days=400)]
    for moment in kept + old:
        await tap(resources, row, moment, LinkVisit.CLICK)
    # A tap ten minutes before Kathmandu's first midnight shares its UTC hour, split in two.
    await tap(resources, row, first_midnights[-1] - timedelta(minutes=10), LinkVisit.CLICK)

    async def chart() -> Timeline:
        async with resources.sessionmaker() as session:
            return await timeline(
                session,
                workspace_id=owner.workspace_id,
                span=Span.DAYS,
                zone=kathmandu,
                now=now,
            )

    async def slices() -> list[datetime]:
        async with resources.engine.connect() as conn:
            found = await conn.execute(
                text("SELECT quarter FROM link_click_quarters ORDER BY quarter")
            )
            return list(found.scalars())

    shown = await chart()
    assert shown.taps[0] >= 1  # the first midnight's tap, from its split hour's slices
    before = await slices()
    async with resources.sessionmaker() as session, session.begin():
        purged = await retention.purge_expired(session)
    assert purged.link_click_quarters == len(old)
    assert await slices() == [q for q in before if q >= now - timedelta(days=32)]
    assert len(await slices()) == len(before) - len(old)
    assert await chart() == shown
