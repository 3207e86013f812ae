"""The surge as the creator sees it, on the overview and the account page: comments waiting
for the hourly limit, the pace, when they will all be answered and how many will miss the
7-day window — live through htmx."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text

from app.db.models import LegState
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
    return re.sub(r"<[^>]+>|\s+", " ", match.group(1)).strip()


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
    assert _field(overview, "sent").startswith("0 of 750")
    assert _field(overview, "pace") == "750 per hour, oldest comments first"
    assert _field(overview, "drain") == "about 1 h 20 min"
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
