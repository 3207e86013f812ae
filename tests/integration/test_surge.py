"""The surge as the creator sees it, on the overview and the account page: comments waiting
for the hourly limit, the pace, when they will all be answered and how many will miss the
7-day window — live through htmx."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy import text

from app.db.models import LegState
from app.delivery.send.budget import PACE_KEY, Slot
from app.delivery.send.budget_history import account_budget
from app.delivery.send.throttle import Throttle
from app.instagram.graph import Usage
from app.resources import Resources
from app.settings import Settings
from tests.support.log_data import Creator, add_logs, log_values, signed_in_creator

HTML = {"accept": "text/html"}


@pytest.fixture
async def owner(
    settings: Settings, resources: Resources, test_env: dict[str, str]
) -> AsyncIterator[Creator]:
    async with signed_in_creator(settings, resources) as creator:
        yield creator


def _field(html: str, name: str) -> str:
    match = re.search(rf'data-field="{name}">(.*?)</dd>', html, re.DOTALL)
    assert match, name
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", match.group(1))).strip()


def _moment(html: str, name: str) -> tuple[datetime, str]:
    """The moment a field names (its `<time>`), and the time of day it shows."""
    match = re.search(
        rf'data-field="{name}">.*?<time datetime="([^"]+)"[^>]*>([^<]+)</time>', html, re.DOTALL
    )
    assert match, name
    return datetime.fromisoformat(match.group(1)), match.group(2)


def _about(moment: datetime, expected: datetime) -> None:
    """`moment` is `expected` rounded up to the minute, give or take a busy machine's delay."""
    assert moment.second == moment.microsecond == 0, moment
    assert expected - timedelta(seconds=5) <= moment <= expected + timedelta(seconds=90), (
        moment,
        expected,
    )


async def test_a_backlog_shows_its_pace_its_end_and_what_will_miss_the_window(
    resources: Resources, owner: Creator
) -> None:
    now = datetime.now(UTC)
    # 100 old comments whose window closes in 100 s (at 750 an hour, a slot every 4.8 s: about
    # the first 20 make it), then 900 recent ones with days to spare.
    rows = [
        log_values(owner, state=LegState.PENDING, deadline_at=now + timedelta(seconds=100))
        for _ in range(100)
    ] + [log_values(owner, state=LegState.PENDING) for _ in range(900)]
    await add_logs(resources, rows)

    overview = (await owner.client.get("/", headers=HTML)).text
    assert "1,000 comments waiting for their DM" in overview
    assert 'data-mode="normal"' in overview
    assert _field(overview, "sent").startswith("0 of 750 used")
    assert _field(overview, "pace") == "750 per hour, oldest comments first"
    assert re.fullmatch(r"by \d\d:\d\d, about 1 h 20 min from now", _field(overview, "drain"))
    clears, shown = _moment(overview, "drain")
    _about(clears, now + timedelta(minutes=80))
    assert shown == clears.strftime("%H:%M")  # the workspace's zone: UTC here
    will_miss = int(re.sub(r"\D", "", _field(overview, "will-miss").split(" at ")[0]))
    assert 70 <= will_miss <= 85, will_miss

    page = await owner.client.get(f"/accounts/{owner.account_id}", headers=HTML)
    assert 'id="surges"' in page.text
    assert 'hx-trigger="every 10s' in page.text
    assert "1,000 comments waiting for their DM" in page.text
    # The 10 s refresh gets only the surge.
    partial = await owner.client.get(
        f"/accounts/{owner.account_id}", headers={**HTML, "HX-Request": "true"}
    )
    assert partial.text.lstrip().startswith('<div id="surges"')
    assert "1,000 comments waiting" in partial.text
    assert "<html" not in partial.text


async def test_no_backlog_no_surge(resources: Resources, owner: Creator) -> None:
    await add_logs(resources, [log_values(owner, state=LegState.SENT)])
    assert "waiting for their DM" not in (await owner.client.get("/", headers=HTML)).text
    page = (await owner.client.get(f"/accounts/{owner.account_id}", headers=HTML)).text
    assert 'class="card surge"' not in page
    # The account page says so, and keeps asking: a surge that starts shows up there.
    assert "No comments are waiting for their DM." in page
    assert 'hx-trigger="every 10s' in page


async def test_one_comment_waiting_reads_in_the_singular(
    resources: Resources, owner: Creator
) -> None:
    await add_logs(resources, [log_values(owner, state=LegState.PENDING)])
    overview = (await owner.client.get("/", headers=HTML)).text
    assert ": 1 comment waiting for their DM" in overview
    assert re.fullmatch(r"by \d\d:\d\d, under a minute from now", _field(overview, "drain"))
    assert _field(overview, "will-miss") == "none at this pace"


async def test_slots_in_use_count_what_is_sent_or_on_its_way_never_more(
    resources: Resources, owner: Creator
) -> None:
    await add_logs(resources, [log_values(owner, state=LegState.PENDING) for _ in range(2)])
    budget = account_budget(resources)
    for _ in range(3):
        assert isinstance(await budget.reserve(owner.account_id), Slot)
    sent = _field((await owner.client.get("/", headers=HTML)).text, "sent")
    assert sent.startswith("3 of 750 used"), sent
    # Slots are taken before a send; the words claim no delivery.
    assert "DMs sent or on their way" in sent


async def test_a_pace_slowed_by_meta_shows_the_slower_rate_and_a_later_end(
    resources: Resources, owner: Creator
) -> None:
    now = datetime.now(UTC)
    await add_logs(resources, [log_values(owner, state=LegState.PENDING) for _ in range(150)])
    throttle = Throttle(resources.redis, window_s=3600)
    # Meta's headers say the account's budget is 95 % used: a fifth of the usual pace.
    usage = Usage(business={"1": [{"type": "instagram", "call_count": 95}]})
    assert await throttle.observe(owner.account_id, usage) is not None
    overview = (await owner.client.get("/", headers=HTML)).text
    assert 'data-mode="slowed"' in overview
    pace = _field(overview, "pace")
    assert pace.startswith("Slowed to 150 per hour (usually 750): Instagram says"), pace
    assert re.search(r"The usual pace is due back at \d\d:\d\d, unless", pace), pace
    assert re.fullmatch(
        r"by \d\d:\d\d, about 1 h from now at the slower pace", _field(overview, "drain")
    )
    _about(_moment(overview, "drain")[0], now + timedelta(hours=1))


async def test_an_account_put_on_hold_by_meta_says_so_and_what_it_means(
    resources: Resources, owner: Creator
) -> None:
    now = datetime.now(UTC)
    # 10 comments whose window closes in 20 min, while Instagram asks for 30 min: all miss.
    rows = [
        log_values(owner, state=LegState.PENDING, deadline_at=now + timedelta(minutes=20))
        for _ in range(10)
    ] + [log_values(owner, state=LegState.PENDING) for _ in range(5)]
    await add_logs(resources, rows)
    usage = Usage(business={"1": [{"call_count": 100, "estimated_time_to_regain_access": 30}]})
    throttle = Throttle(resources.redis, window_s=3600)
    assert await throttle.observe(owner.account_id, usage, code=4) is not None
    for html in (
        (await owner.client.get("/", headers=HTML)).text,
        (await owner.client.get(f"/accounts/{owner.account_id}", headers=HTML)).text,
    ):
        assert 'data-mode="paused"' in html
        pace = _field(html, "pace")
        # 30 minutes from when Meta said it, a few seconds ago on a busy machine: a time,
        # and how long until then.
        assert re.fullmatch(
            r"On hold: Instagram asked this account to wait\. Sending resumes at \d\d:\d\d"
            r" \(in about (29|30) min\)\.",
            pace,
        ), pace
        resumes, _ = _moment(html, "pace")
        _about(resumes, now + timedelta(minutes=30))
        # The last hour's slots are not set beside the hold as a share of the limit in use.
        assert _field(html, "sent") == "no DMs; none go out until it ends"
        # Then 15 comments at 750 an hour.
        assert re.fullmatch(
            r"by \d\d:\d\d, about 1 min after sending resumes", _field(html, "drain")
        )
        clears, _ = _moment(html, "drain")
        assert resumes < clears <= resumes + timedelta(minutes=2)
        assert _field(html, "will-miss").startswith("10 at this pace")
        # Meta's code is for the details (the delivery log), not this panel.
        assert "code 4" not in pace
        assert "SENT" not in html.split('id="surge-', 1)[1].split("</section>", 1)[0]


async def test_the_times_are_in_the_workspaces_zone(resources: Resources, owner: Creator) -> None:
    # Kathmandu is 5 h 45 min ahead of UTC: no UTC time of day reads the same there.
    async with resources.sessionmaker() as session, session.begin():
        await session.execute(
            text("UPDATE workspaces SET time_zone = 'Asia/Kathmandu' WHERE id = :id"),
            {"id": owner.workspace_id},
        )
    await add_logs(resources, [log_values(owner, state=LegState.PENDING) for _ in range(1_500)])
    usage = Usage(business={"1": [{"call_count": 100, "estimated_time_to_regain_access": 90}]})
    throttle = Throttle(resources.redis, window_s=3600)
    assert await throttle.observe(owner.account_id, usage, code=4) is not None
    html = (await owner.client.get(f"/accounts/{owner.account_id}", headers=HTML)).text
    zone = ZoneInfo("Asia/Kathmandu")
    for name in ("pace", "drain"):
        moment, shown = _moment(html, name)
        local = moment.astimezone(zone)
        # Two hours of backlog after a 90-minute hold: the end may fall on another day there.
        day = "" if local.date() == datetime.now(zone).date() else local.strftime("%b %d ")
        assert shown == day + local.strftime("%H:%M"), (name, shown, moment)
    assert re.search(r'<time datetime="[^"]+" title="[^"]+ Asia/Kathmandu · [^"]+ UTC">', html)


async def test_a_pace_redis_cannot_tell_is_said_to_be_unknown_not_guessed(
    resources: Resources, owner: Creator
) -> None:
    await add_logs(resources, [log_values(owner, state=LegState.PENDING) for _ in range(40)])
    # Redis answers the account's pace with an error (the key holds the wrong type).
    await resources.redis.set(PACE_KEY.format(account_id=owner.account_id), "not a pace")
    overview = (await owner.client.get("/", headers=HTML)).text
    assert 'data-mode="unknown"' in overview
    assert _field(overview, "pace").startswith("Not known right now:"), _field(overview, "pace")
    assert _field(overview, "sent") == "not known right now"
    assert _field(overview, "drain") == "not known right now"
    assert _field(overview, "will-miss") == "none at the usual pace"
    # No pace, no end time is made up.
    assert "750 per hour" not in overview
    assert "40 comments waiting for their DM" in overview


async def test_public_replies_waiting_for_their_limit_are_counted_apart(
    resources: Resources, owner: Creator
) -> None:
    now = datetime.now(UTC)
    waiting_dm = [log_values(owner, state=LegState.PENDING) for _ in range(3)]
    # DMs sent, their public replies left to the pacer for the public replies' hourly limit.
    waiting_public = [
        log_values(owner, state=LegState.SENT, pub_state=LegState.PENDING, pub_queued_at=now)
        for _ in range(5)
    ]
    await add_logs(resources, waiting_dm + waiting_public)
    overview = (await owner.client.get("/", headers=HTML)).text
    assert "3 comments waiting for their DM" in overview
    assert _field(overview, "public-waiting").startswith("5, posted after the DMs")
    assert "of 750 public replies per hour" in _field(overview, "public-waiting")

    # Only public replies waiting: the account's card says so.
    async with resources.sessionmaker() as session, session.begin():
        await session.execute(
            text("UPDATE dm_logs SET pr_state = 'SENT' WHERE pr_state = 'PENDING'")
        )
    page = await owner.client.get(f"/accounts/{owner.account_id}", headers=HTML)
    assert "5 public replies waiting" in page.text
    assert "waiting for their DM" not in page.text
    # No DM backlog to clear, and no time said for one.
    assert _field(page.text, "drain") == "no DMs waiting"
