"""The funnel's people who tapped a link each day, kept as clicks are copied in, agree with the
rows: in a half-hour zone, after the workspace's zone changes (the worker counts the days again;
until it has, the funnel counts them from the clicks), and while clicks are copied during zone
changes (each copy counts in the zone its workspace row held, the recount sees every copy
before it).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import Counter
from datetime import UTC, date, datetime, time, timedelta
from itertools import count
from pathlib import Path
from zoneinfo import ZoneInfo

from sqlalchemy import text

from app.clicks.day_recount import recount_click_days
from app.clicks.recorder import SpooledClick, copy_clicks
from app.clicks.visitors import Visit
from app.db.models import Campaign, LegState, MessageKind, Workspace
from app.delivery_log.funnel import campaign_funnel
from app.maintenance import retention
from app.resources import Resources
from app.settings import Settings
from app.workspaces.time_zone import set_time_zone
from tests.support.dashboard import SUNNY, add_account, tokens
from tests.support.log_data import Creator, add_campaign, add_log, signed_in_creator
from tests.support.processes import start_worker

KOLKATA = ZoneInfo("Asia/Kolkata")  # UTC+5:30
ST_JOHNS = ZoneInfo("America/St_Johns")  # UTC-3:30 (or -2:30 in summer)
_ids = count(1)


async def creator(resources: Resources, zone: str) -> Creator:
    async with resources.sessionmaker() as session, session.begin():
        workspace = Workspace(name="Taps", time_zone=zone)
        session.add(workspace)
        await session.flush()
        workspace_id = workspace.id
    account = await add_account(resources, workspace_id, ig_user_id=SUNNY)
    campaign = await add_campaign(resources, workspace_id, account, "Recipe")
    return Creator(None, 0, workspace_id, account, campaign)


async def link_dms(resources: Resources, owner: Creator, people: int) -> list[int]:
    return [
        await add_log(
            resources,
            owner,
            recipient_id=str(7000 + person),
            message_kind=MessageKind.REVEAL,
            state=LegState.SENT,
        )
        for person in range(people)
    ]


def clicks_around_midnights(links: list[int], now: datetime, n: int) -> list[SpooledClick]:
    """`n` taps (a preview now and then) spread over Kolkata's and St John's last midnights."""
    midnights = [
        datetime.combine(now.astimezone(zone).date() - timedelta(days=back), time.min, zone)
        for zone in (KOLKATA, ST_JOHNS)
        for back in range(3)
    ]
    return [
        SpooledClick(
            key=hashlib.sha256(f"tap {next(_ids)}".encode()).digest()[:16],
            dm_log_id=links[(i * 7) % len(links)],
            button=i % 2,
            visit=Visit.PREVIEW if i % 9 == 0 else Visit.CLICK,
            at=min(now, midnights[i % len(midnights)] + timedelta(minutes=(i % 13) * 9 - 55)),
        )
        for i in range(n)
    ]


async def people_per_day(resources: Resources, owner: Creator, zone: ZoneInfo) -> Counter[date]:
    """Counted here from the raw rows: one per person and local day."""
    async with resources.engine.connect() as conn:
        rows = await conn.execute(
            text(
                "SELECT recipient_id, clicked_at FROM link_clicks "
                "WHERE campaign_id = :c AND visit = 'click'"
            ),
            {"c": owner.campaign_id},
        )
        pairs = {(person, at.astimezone(zone).date()) for person, at in rows}
    return Counter(day for _, day in pairs)


async def funnel_days(
    resources: Resources, owner: Creator, zone: ZoneInfo, now: datetime
) -> Counter[date]:
    async with resources.sessionmaker() as session:
        campaign = await session.get_one(Campaign, owner.campaign_id)
        funnel = await campaign_funnel(session, campaign, zone=zone, now=now)
    return +Counter({day.day: day.counts["clicked"] for day in funnel.days})


async def kept_days(resources: Resources, owner: Creator) -> Counter[date]:
    async with resources.engine.connect() as conn:
        rows = await conn.execute(
            text("SELECT day, people FROM link_click_days WHERE campaign_id = :c"),
            {"c": owner.campaign_id},
        )
        return +Counter(dict(rows.tuples().all()))


async def change_zone(resources: Resources, owner: Creator, zone: ZoneInfo) -> None:
    """The settings request's change, then the worker's recount (each its own transaction)."""
    async with resources.sessionmaker() as session, session.begin():
        await set_time_zone(session, owner.workspace_id, zone.key)
    async with resources.sessionmaker() as session, session.begin():
        assert await recount_click_days(session, owner.workspace_id)


async def recount_due(resources: Resources, owner: Creator) -> bool:
    async with resources.engine.connect() as conn:
        due = await conn.scalar(
            text("SELECT click_days_recount_due FROM workspaces WHERE id = :w"),
            {"w": owner.workspace_id},
        )
    return bool(due)


async def test_people_per_day_follow_the_workspace_zone(resources: Resources) -> None:
    now = datetime.now(UTC)
    owner = await creator(resources, "Asia/Kolkata")
    links = await link_dms(resources, owner, 9)
    clicks = clicks_around_midnights(links, now, 120)
    for start in range(0, len(clicks), 25):
        await copy_clicks(resources.engine, clicks[start : start + 25])
    # Copied twice (a spool segment copied again): nothing changes.
    await copy_clicks(resources.engine, clicks[:50])

    expected = await people_per_day(resources, owner, KOLKATA)
    assert len(expected) >= 4
    assert sum(expected.values()) > len(links)  # people come back on other days
    assert await kept_days(resources, owner) == expected
    assert await funnel_days(resources, owner, KOLKATA, now) == expected

    # The creator moves to St John's: the days are counted again in the new zone.
    await change_zone(resources, owner, ST_JOHNS)
    expected = await people_per_day(resources, owner, ST_JOHNS)
    assert await kept_days(resources, owner) == expected
    assert await funnel_days(resources, owner, ST_JOHNS, now) == expected
    # Asked for another zone than the kept one, the funnel counts the raw rows.
    assert await funnel_days(resources, owner, KOLKATA, now) == await people_per_day(
        resources, owner, KOLKATA
    )

    # New taps after the change count in the new zone.
    await copy_clicks(resources.engine, clicks_around_midnights(links, now, 40))
    expected = await people_per_day(resources, owner, ST_JOHNS)
    assert await kept_days(resources, owner) == expected
    assert await funnel_days(resources, owner, ST_JOHNS, now) == expected


async def test_copies_racing_zone_changes_count_each_person_day_once(
    resources: Resources,
) -> None:
    now = datetime.now(UTC)
    owner = await creator(resources, "Asia/Kolkata")
    links = await link_dms(resources, owner, 15)
    clicks = clicks_around_midnights(links, now, 400)
    batches = [clicks[start : start + 10] for start in range(0, len(clicks), 10)]
    zones = [ST_JOHNS, KOLKATA, ZoneInfo("Asia/Kathmandu"), ST_JOHNS, KOLKATA]
    copied = 0
    changed = 0
    progress = asyncio.Condition()

    async def copier(mine: list[list[SpooledClick]]) -> None:
        nonlocal copied
        for batch in mine:
            await copy_clicks(resources.engine, batch)
            async with progress:
                copied += 1
                progress.notify_all()

    async def mover() -> None:
        nonlocal changed
        for zone in zones:
            # A change while copies are under way: wait until a few more batches are in.
            target = min(copied + 4, len(batches))
            async with progress:
                await progress.wait_for(lambda target=target: copied >= target)
            await change_zone(resources, owner, zone)
            changed += 1

    await asyncio.gather(
        copier(batches[0::3]), copier(batches[1::3]), copier(batches[2::3]), mover()
    )
    assert (copied, changed) == (len(batches), len(zones))
    final = zones[-1]
    expected = await people_per_day(resources, owner, final)
    assert sum(expected.values()) > 0
    assert await kept_days(resources, owner) == expected
    assert await funnel_days(resources, owner, final, now) == expected


async def test_a_zone_postgresql_does_not_know_counts_in_utc(resources: Resources) -> None:
    """A stored zone PostgreSQL's tz database lacks (newer in Python's) never stops a copy: the
    days are kept in UTC, as the dashboard then shows them."""
    now = datetime.now(UTC)
    owner = await creator(resources, "Mars/Olympus_Mons")
    links = await link_dms(resources, owner, 5)
    await copy_clicks(resources.engine, clicks_around_midnights(links, now, 30))
    async with resources.engine.connect() as conn:
        copied = await conn.scalar(text("SELECT count(*) FROM link_clicks"))
    assert copied == 30
    expected = await people_per_day(resources, owner, ZoneInfo("UTC"))
    assert await kept_days(resources, owner) == expected
    assert await funnel_days(resources, owner, ZoneInfo("UTC"), now) == expected


async def test_retention_forgets_taps_per_day_older_than_any_day_a_page_counts(
    resources: Resources,
) -> None:
    """The retention job deletes the people kept per day, and their count per day, once the
    day is older than every day the funnel shows or a change of zone counts again, in any
    zone; the funnel's days stay as they were."""
    now = datetime.now(UTC)
    owner = await creator(resources, "Asia/Kolkata")
    links = await link_dms(resources, owner, 6)
    await copy_clicks(resources.engine, clicks_around_midnights(links, now, 40))
    recent = await kept_days(resources, owner)
    # The oldest day each extreme zone's rebuild counts again (its today, 31 days back).
    kept_edges = {
        now.astimezone(ZoneInfo(zone)).date() - timedelta(days=31)
        for zone in ("Pacific/Kiritimati", "Pacific/Pago_Pago", "UTC")
    }
    utc_today = now.date()
    old = {utc_today - timedelta(days=back) for back in (33, 40, 400)}
    async with resources.engine.begin() as conn:
        for day in kept_edges | old:
            await conn.execute(
                text(
                    "INSERT INTO link_click_day_people (campaign_id, day, recipient_id) "
                    "VALUES (:c, :d, 'old-person')"
                ),
                {"c": owner.campaign_id, "d": day},
            )
            await conn.execute(
                text(
                    "INSERT INTO link_click_days (campaign_id, day, workspace_id, people) "
                    "VALUES (:c, :d, :w, 1)"
                ),
                {"c": owner.campaign_id, "d": day, "w": owner.workspace_id},
            )

    async with resources.sessionmaker() as session, session.begin():
        purged = await retention.purge_expired(session)
    assert purged.link_click_day_people == len(old)
    assert purged.link_click_days == len(old)
    # The count of a day goes with its people, and only then.
    assert await kept_days(resources, owner) == recent + Counter(kept_edges)
    async with resources.engine.connect() as conn:
        left = set(
            (
                await conn.execute(
                    text(
                        "SELECT day FROM link_click_day_people "
                        "WHERE campaign_id = :c AND recipient_id = 'old-person'"
                    ),
                    {"c": owner.campaign_id},
                )
            ).scalars()
        )
    assert left == kept_edges
    assert await funnel_days(resources, owner, KOLKATA, now) == recent
    # New taps by the same people on the same days count nobody twice: those days kept theirs.
    await copy_clicks(resources.engine, clicks_around_midnights(links, now, 40))
    tapped = await people_per_day(resources, owner, KOLKATA)
    assert await kept_days(resources, owner) == tapped + Counter(kept_edges)


async def test_a_change_of_zone_is_counted_again_by_the_worker_not_the_request(
    settings: Settings, resources: Resources, test_env: dict[str, str], artifacts_dir: Path
) -> None:
    """The Team page's change of zone only marks the workspace; until the worker has counted
    the days again the funnel counts them from the clicks, in the new zone, so the page is
    true meanwhile; the job the request enqueued then counts them."""
    now = datetime.now(UTC)
    async with signed_in_creator(settings, resources) as owner:
        async with resources.sessionmaker() as session, session.begin():
            await set_time_zone(session, owner.workspace_id, "Asia/Kolkata")
        links = await link_dms(resources, owner, 9)
        # One more person, once, at 03:00 in Kolkata: the evening before in St John's.
        lonely = await add_log(
            resources,
            owner,
            recipient_id="7999",
            message_kind=MessageKind.REVEAL,
            state=LegState.SENT,
        )
        at = datetime.combine(now.astimezone(KOLKATA).date(), time(3), KOLKATA)
        at = at if at <= now else at - timedelta(days=1)
        once = SpooledClick(b"lonely tap 00001", lonely, 0, Visit.CLICK, at.astimezone(UTC))
        await copy_clicks(resources.engine, [*clicks_around_midnights(links, now, 120), once])
        in_kolkata = await kept_days(resources, owner)
        assert in_kolkata == await people_per_day(resources, owner, KOLKATA)

        page = await owner.client.get("/team", headers={"accept": "text/html"})
        form = {**tokens(page.text, "/team/time-zone"), "time_zone": ST_JOHNS.key}
        saved = await owner.client.post("/team/time-zone", data=form)
        assert saved.status_code == 200, saved.text

    # The request counted nothing again: the kept days are still Kolkata's...
    assert await recount_due(resources, owner)
    assert await kept_days(resources, owner) == in_kolkata
    expected = await people_per_day(resources, owner, ST_JOHNS)
    assert expected != in_kolkata
    # ...and the funnel, asked in the new zone, counts the clicks instead of showing them.
    assert await funnel_days(resources, owner, ST_JOHNS, now) == expected

    worker = start_worker(test_env, artifacts_dir)
    try:
        while await recount_due(resources, owner):
            assert worker.running, worker.output()
            await asyncio.sleep(0.2)
    finally:
        worker.stop()
    assert await kept_days(resources, owner) == expected
    assert await funnel_days(resources, owner, ST_JOHNS, now) == expected


async def test_only_a_new_zone_marks_the_workspace_for_a_recount(resources: Resources) -> None:
    now = datetime.now(UTC)
    owner = await creator(resources, "Asia/Kolkata")
    links = await link_dms(resources, owner, 4)
    await copy_clicks(resources.engine, clicks_around_midnights(links, now, 30))
    kept = await kept_days(resources, owner)
    # The same zone again marks nothing.
    async with resources.sessionmaker() as session, session.begin():
        await set_time_zone(session, owner.workspace_id, "Asia/Kolkata")
    assert not await recount_due(resources, owner)
    async with resources.sessionmaker() as session, session.begin():
        assert not await recount_click_days(session, owner.workspace_id)
    assert await kept_days(resources, owner) == kept
    # Any writer of a new zone marks the workspace, not only the settings form.
    async with resources.engine.begin() as conn:
        await conn.execute(
            text("UPDATE workspaces SET time_zone = 'America/St_Johns' WHERE id = :w"),
            {"w": owner.workspace_id},
        )
    assert await recount_due(resources, owner)
    assert await funnel_days(resources, owner, ST_JOHNS, now) == await people_per_day(
        resources, owner, ST_JOHNS
    )
