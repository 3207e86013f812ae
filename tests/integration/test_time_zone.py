"""The workspace's time zone: chosen at sign-up from the browser, changed on the Team page by
owners and admins, and used for every time the dashboard shows (UTC on hover) and for the
overview's "today"."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import httpx
import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy import text

from app.asgi import create_app
from app.db.models import LegState
from app.resources import Resources
from app.settings import Settings
from app.workspaces.time_zone import start_of_day
from tests.support.dashboard import PASSWORD, tokens
from tests.support.log_data import Creator, add_log, signed_in_creator

HTML = {"accept": "text/html"}
TOKYO = ZoneInfo("Asia/Tokyo")


@pytest.fixture
async def owner(
    settings: Settings, resources: Resources, test_env: dict[str, str]
) -> AsyncIterator[Creator]:
    async with signed_in_creator(settings, resources) as creator:
        yield creator


async def _zone_of(resources: Resources, workspace_id: int) -> str:
    async with resources.engine.connect() as conn:
        zone = await conn.scalar(
            text("SELECT time_zone FROM workspaces WHERE id = :id"), {"id": workspace_id}
        )
    assert isinstance(zone, str)
    return zone


async def _set_zone(owner: Creator, zone: str) -> httpx.Response:
    page = await owner.client.get("/team", headers=HTML)
    assert page.status_code == 200
    form = {**tokens(page.text, "/team/time-zone"), "time_zone": zone}
    response: httpx.Response = await owner.client.post("/team/time-zone", data=form, headers=HTML)
    return response


def _stat(html: str, element_id: str) -> int:
    match = re.search(rf'id="{element_id}"[^>]*>\s*(?:<span class="stat-number">)?(\d+)', html)
    assert match, element_id
    return int(match.group(1))


async def test_a_tokyo_workspace_sees_its_times_and_its_today(
    resources: Resources, owner: Creator
) -> None:
    assert await _zone_of(resources, owner.workspace_id) == "UTC"  # no browser zone sent
    saved = await _set_zone(owner, "Asia/Tokyo")
    assert saved.status_code == 200
    assert "Time zone saved" in saved.text
    assert await _zone_of(resources, owner.workspace_id) == "Asia/Tokyo"

    now = datetime.now(UTC)
    tokyo_day = start_of_day(TOKYO, now)
    # One delivery just before Tokyo's midnight, one just after (when that is already past):
    # whichever side of UTC's midnight they fall, only the second is Tokyo's "today".
    before = (tokyo_day - timedelta(minutes=1)).astimezone(UTC)
    after = min(tokyo_day + timedelta(minutes=1), now - timedelta(seconds=1)).astimezone(UTC)
    await add_log(resources, owner, state=LegState.FAILED, created_at=before)
    await add_log(resources, owner, state=LegState.SENT, created_at=after)

    overview = await owner.client.get("/", headers=HTML)
    assert overview.status_code == 200
    assert _stat(overview.text, "stat-sent") == 1
    assert _stat(overview.text, "stat-failed") == 0
    assert "since 00:00 Asia/Tokyo" in overview.text
    # The log's filter is in UTC days: the link starts on the UTC day Tokyo's day began in.
    assert f"from={tokyo_day.astimezone(UTC).date().isoformat()}" in overview.text

    campaigns = await owner.client.get("/campaigns", headers=HTML)
    assert campaigns.status_code == 200
    assert '<span class="count-sent" title="sent">1 sent</span>' in campaigns.text
    assert 'class="count-failed"' not in campaigns.text

    log = await owner.client.get("/log", headers=HTML)
    assert log.status_code == 200
    shown = after.astimezone(TOKYO)
    utc = after.strftime("%Y-%m-%d %H:%M:%S UTC")
    element = re.search(
        rf'<time datetime="{re.escape(after.isoformat())}" title="([^"]+)">([^<]+)</time>',
        log.text,
    )
    assert element, re.findall(r"<time[^>]*>[^<]*</time>", log.text)
    assert element.group(1) == f"{shown.strftime('%Y-%m-%d %H:%M:%S')} Asia/Tokyo · {utc}"
    assert element.group(2) == shown.strftime("%H:%M:%S")  # today in Tokyo: no date
    yesterday = before.astimezone(TOKYO)
    assert f">{yesterday.strftime('%b %d %H:%M:%S')}</time>" in log.text


async def test_an_unknown_zone_is_a_field_error_and_changes_nothing(
    resources: Resources, owner: Creator
) -> None:
    # The last two are files of the tz database that ZoneInfo opens but PostgreSQL does not
    # know: its counts would be kept in UTC while the pages showed the zone.
    for bad in (
        "Mars/Olympus_Mons",
        "../../etc/passwd",
        "x" * 200,
        "",
        "right/UTC",
        "posix/Asia/Tokyo",
    ):
        refused = await _set_zone(owner, bad)
        assert refused.status_code == 422, bad
        page = refused.text
        assert 'id="time_zone-error"' in page, bad
        assert "Traceback" not in page
    assert await _zone_of(resources, owner.workspace_id) == "UTC"


@pytest.mark.parametrize(
    ("sent", "stored"), [("America/Sao_Paulo", "America/Sao_Paulo"), ("Not/AZone", "UTC")]
)
async def test_sign_up_takes_the_browser_zone(
    settings: Settings, resources: Resources, test_env: dict[str, str], sent: str, stored: str
) -> None:
    async with AsyncTestClient(create_app(settings)) as client:
        page = await client.get("/signup")
        assert 'name="time_zone"' in page.text
        form = {
            **tokens(page.text, "/signup"),
            "email": "zone@example.com",
            "password": PASSWORD,
            "workspace": "",
            "time_zone": sent,
        }
        made = await client.post("/signup", data=form, follow_redirects=False)
        assert made.status_code == 303, made.text
    async with resources.engine.connect() as conn:
        zone = await conn.scalar(
            text(
                "SELECT w.time_zone FROM workspaces w JOIN workspace_members m"
                " ON m.workspace_id = w.id JOIN users u ON u.id = m.user_id"
                " WHERE u.email = 'zone@example.com'"
            )
        )
    assert zone == stored
