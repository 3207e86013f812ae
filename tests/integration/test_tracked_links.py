"""Tracked links: the redirect, what it counts, and that it answers with the database down.

Real web apps in-process (the redirect, the spool, the copier), real PostgreSQL and Redis; the
outage is a TCP proxy cut in front of them, so the shared servers keep running.
"""

from __future__ import annotations

import asyncio
import csv
import io
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from app.asgi import create_app
from app.auth.sessions import SESSION_COOKIE
from app.clicks.links import LINK_PATH, LinkTracker
from app.clicks.tokens import link_key
from app.db.models import LegState, MessageKind
from app.resources import Resources
from app.settings import Settings, load_settings
from tests.support.infra import base_env
from tests.support.log_data import Creator, add_log, signed_in_creator
from tests.support.tcp_proxy import TcpProxy

PHONE = {
    "user-agent": "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 "
    "(KHTML, like Gecko) Mobile/15E148 Instagram 321.0.0.29.112"
}
META_CRAWLER = {"user-agent": "facebookexternalhit/1.1 (+http://www.facebook.com/externalhit)"}
RECIPE = "https://sunny.example/lemon"
SHOP = "https://shop.example/loaf?ref=bio"


@pytest.fixture
async def owner(settings: Settings, resources: Resources) -> AsyncIterator[Creator]:
    async with signed_in_creator(settings, resources) as creator:
        yield creator


def tracked(settings: Settings, dm_log_id: int, button: int, url: str, **kw: Any) -> str:
    tracker = LinkTracker(settings.public_base_url, link_key(settings.secret_key), dm_log_id, **kw)
    return tracker.track(button, url).removeprefix(settings.public_base_url)


async def clicks(settings: Settings) -> list[tuple[Any, ...]]:
    async with await psycopg.AsyncConnection.connect(_db_url(settings)) as conn:
        cursor = await conn.execute(
            "SELECT dm_log_id, button, visit, recipient_id, campaign_id FROM link_clicks "
            "ORDER BY id"
        )
        return await cursor.fetchall()


def app_with_spool(settings: Settings, spool: Path, **env: str) -> Litestar:
    """A web app whose click spool is `spool` (so a test sees what it alone spooled)."""
    return create_app(load_settings({**_env(settings), "CLICK_SPOOL_DIR": str(spool), **env}))


def spooled(spool: Path) -> list[Path]:
    return [p for p in spool.iterdir() if p.suffix in {".open", ".ready"}] if spool.exists() else []


async def wait_for(check: Callable[[], Awaitable[bool]], *, within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if await check():
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"gave up after {within:g} s waiting for {what}")


async def copied(*spools: Path) -> None:
    """Wait until the apps' own copiers have emptied their spools into PostgreSQL."""

    async def empty() -> bool:
        return not any(spooled(spool) for spool in spools)

    await wait_for(empty, within=60, what="the click spool to be copied")


async def test_clicks_are_attributed_to_row_and_button(
    settings: Settings, resources: Resources, owner: Creator, tmp_path: Path
) -> None:
    jane = await add_log(resources, owner, username="jane.doe", recipient_id="111")
    omar = await add_log(resources, owner, username="omar", recipient_id="222")
    async with AsyncTestClient(app_with_spool(settings, tmp_path)) as client:
        for path in (
            tracked(settings, jane, 0, RECIPE),
            tracked(settings, jane, 1, SHOP),
            tracked(settings, jane, 0, RECIPE),  # jane again: a second click, not a new person
            tracked(settings, omar, 0, RECIPE),
        ):
            answer = await client.get(path, headers=PHONE, follow_redirects=False)
            assert answer.status_code == 302
            assert answer.headers["location"] in {RECIPE, SHOP}
            assert "set-cookie" not in answer.headers
        await copied(tmp_path)
    rows = await clicks(settings)
    campaign = owner.campaign_id
    assert rows == [
        (jane, 0, "click", "111", campaign),
        (jane, 1, "click", "111", campaign),
        (jane, 0, "click", "111", campaign),
        (omar, 0, "click", "222", campaign),
    ]
    total = len(rows)
    unique = len({(r[4], r[3]) for r in rows})
    assert (total, unique) == (4, 2)


async def test_previews_and_head_requests_are_counted_apart(
    settings: Settings, resources: Resources, owner: Creator, tmp_path: Path
) -> None:
    row = await add_log(resources, owner)
    path = tracked(settings, row, 0, RECIPE)
    async with AsyncTestClient(app_with_spool(settings, tmp_path)) as client:
        crawled = await client.get(path, headers=META_CRAWLER, follow_redirects=False)
        head = await client.head(path, headers=PHONE, follow_redirects=False)
        prefetch = await client.get(
            path, headers={**PHONE, "sec-purpose": "prefetch"}, follow_redirects=False
        )
        person = await client.get(path, headers=PHONE, follow_redirects=False)
        await copied(tmp_path)
    # Everyone is sent on: a preview card needs the destination too.
    assert [a.status_code for a in (crawled, head, prefetch, person)] == [302] * 4
    visits = [r[2] for r in await clicks(settings)]
    assert sorted(visits) == ["click", "preview", "preview", "preview"]


async def test_utm_tags_and_the_creators_own_parameters(
    settings: Settings, resources: Resources, owner: Creator
) -> None:
    row = await add_log(resources, owner)
    path = tracked(settings, row, 0, SHOP + "&utm_source=bio", campaign_name="Lemon loaf", utm=True)
    async with AsyncTestClient(create_app(settings)) as client:
        answer = await client.get(path, headers=PHONE, follow_redirects=False)
    assert answer.headers["location"] == (
        "https://shop.example/loaf?ref=bio&utm_source=bio&utm_medium=dm&utm_campaign=Lemon+loaf"
    )


@pytest.mark.parametrize("mangle", ["flip", "cut", "garbage", "empty-ish"])
async def test_an_unknown_or_tampered_link_gets_a_friendly_404(
    settings: Settings, resources: Resources, owner: Creator, mangle: str, tmp_path: Path
) -> None:
    row = await add_log(resources, owner)
    path = tracked(settings, row, 0, RECIPE)
    token = path.removeprefix("/go/")
    bad = {
        "flip": token[:10] + ("A" if token[10] != "A" else "B") + token[11:],
        "cut": token[:-3],
        "garbage": "not-a-link-at-all",
        "empty-ish": "%00%ff",
    }[mangle]
    async with AsyncTestClient(app_with_spool(settings, tmp_path)) as client:
        answer = await client.get(f"/go/{bad}", headers=PHONE, follow_redirects=False)
        # Nothing was spooled: there is no click to wait for.
        assert spooled(tmp_path) == []
    assert answer.status_code == 404
    assert "text/html" in answer.headers["content-type"]
    assert "set-cookie" not in answer.headers
    assert "This link doesn't work" in answer.text
    assert "Traceback" not in answer.text
    assert await clicks(settings) == []


def test_no_other_route_starts_with_the_link_prefix(settings: Settings) -> None:
    """The redirect is a mount, and a mount takes every path that starts with its prefix."""
    prefix = LINK_PATH.rstrip("/")
    others = [r.path for r in create_app(settings).routes if r.path != prefix]
    assert [path for path in others if path.startswith(prefix)] == []


async def test_a_link_is_only_read(
    settings: Settings, resources: Resources, owner: Creator, tmp_path: Path
) -> None:
    path = tracked(settings, await add_log(resources, owner), 0, RECIPE)
    async with AsyncTestClient(app_with_spool(settings, tmp_path)) as client:
        answer = await client.post(path, data={"x": "1"}, headers=PHONE, follow_redirects=False)
        assert answer.status_code == 405
        assert answer.headers["allow"] == "GET, HEAD"
        assert spooled(tmp_path) == []


async def test_same_request_id_on_two_processes_is_one_click(
    settings: Settings, resources: Resources, owner: Creator, tmp_path: Path
) -> None:
    """A proxy that replays a request (same X-Request-Id) to two web processes at once: both
    redirect, the click counts once. Different ids are different clicks."""
    row = await add_log(resources, owner)
    path = tracked(settings, row, 0, RECIPE)
    spools = [tmp_path / "web-1", tmp_path / "web-2"]
    apps = [app_with_spool(settings, spool) for spool in spools]
    async with AsyncTestClient(apps[0]) as one, AsyncTestClient(apps[1]) as two:
        replayed = {**PHONE, "x-request-id": "req-7f3a"}
        answers = await asyncio.gather(
            one.get(path, headers=replayed, follow_redirects=False),
            two.get(path, headers=replayed, follow_redirects=False),
            one.get(path, headers={**PHONE, "x-request-id": "req-other"}, follow_redirects=False),
        )
        assert [a.status_code for a in answers] == [302, 302, 302]
        # Both processes' copiers insert the replayed key; the database keeps one.
        await copied(*spools)
    assert len(await clicks(settings)) == 2


async def test_redirect_answers_while_postgres_and_redis_are_down(
    settings: Settings, resources: Resources, owner: Creator, tmp_path: Path
) -> None:
    row = await add_log(resources, owner, recipient_id="333")
    path = tracked(settings, row, 0, RECIPE)
    spool = tmp_path / "spool"
    with TcpProxy(5432) as pg, TcpProxy(_redis_port(settings)) as redis:
        app = app_with_spool(
            settings,
            spool,
            DATABASE_URL=_db_url(settings).replace(":5432/", f":{pg.port}/"),
            REDIS_URL=settings.redis_url.replace(":6379/", f":{redis.port}/"),
        )
        async with AsyncTestClient(app) as client:
            pg.down()
            redis.down()
            answer = await client.get(path, headers=PHONE, follow_redirects=False)
            assert answer.status_code == 302
            assert answer.headers["location"] == RECIPE
            # A fan who is also signed in to the dashboard: the session is never looked up
            # (Redis is down) and no cookie comes back.
            signed_in = await client.get(
                path,
                headers={**PHONE, "cookie": f"{SESSION_COOKIE}=abcdefabcdefabcdef"},
                follow_redirects=False,
            )
            assert signed_in.status_code == 302
            assert "set-cookie" not in signed_in.headers

            async def sealed() -> bool:
                return any(p.suffix == ".ready" for p in spooled(spool))

            # The copier sealed the segment to copy it, and could not: it waits in the spool.
            await wait_for(sealed, within=60, what="the copier to take up the click")
            assert await clicks(settings) == []
            assert spooled(spool), "the click waits in the spool"

            pg.up()
            redis.up()
            # The recorder's own loop copies it, with no help from the test.
            await copied(spool)
    assert await clicks(settings) == [(row, 0, "click", "333", owner.campaign_id)] * 2


def _db_url(settings: Settings) -> str:
    return settings.database_url.replace("+psycopg", "")


def _env(settings: Settings) -> dict[str, str]:
    return base_env(_db_url(settings), settings.redis_url)


def _redis_port(settings: Settings) -> int:
    return int(settings.redis_url.rsplit(":", 1)[1].split("/")[0])


async def test_the_campaign_page_counts_people_taps_and_the_rate(
    settings: Settings, resources: Resources, owner: Creator, tmp_path: Path
) -> None:
    rows = [
        await add_log(resources, owner, recipient_id=str(n), message_kind=MessageKind.REVEAL)
        for n in (111, 222, 333, 444)
    ]
    jane, omar = rows[0], rows[1]
    taps = [(jane, 0, PHONE), (jane, 0, PHONE), (jane, 1, PHONE), (omar, 0, PHONE)]
    async with AsyncTestClient(app_with_spool(settings, tmp_path)) as client:
        for row, button, headers in [*taps, (omar, 1, META_CRAWLER)]:
            path = tracked(settings, row, button, RECIPE)
            answer = await client.get(path, headers=headers, follow_redirects=False)
            assert answer.status_code == 302
        await copied(tmp_path)

    page = (await owner.client.get(f"/campaigns/{owner.campaign_id}")).text
    assert _stat(page, "clicks-people") == "2"
    assert _stat(page, "clicks-taps") == "4"
    assert _stat(page, "clicks-rate") == "50.0%"  # 2 of the 4 people sent the link
    # The link-taps card's own table (the funnel further down has its per-button rows too).
    table = page[page.index('id="clicks-per-button"') :]
    table = table[: table.index("</table>")]
    per_button = re.findall(
        r'<tr data-button="(\d)">.*?class="n-people">(\d+)<.*?class="n-taps">(\d+)<', table
    )
    assert per_button == [("0", "2", "3"), ("1", "1", "1")]
    assert "(1 so far)" in page  # the crawler's fetch, apart


def _stat(page: str, element_id: str) -> str:
    match = re.search(rf'id="{element_id}"><span class="stat-number">([^<]+)<', page)
    assert match, element_id
    return match.group(1)


async def test_the_campaign_summary_csv(
    settings: Settings, resources: Resources, owner: Creator, tmp_path: Path
) -> None:
    rows = [
        await add_log(resources, owner, recipient_id=str(n), message_kind=MessageKind.REVEAL)
        for n in (111, 222)
    ]
    await add_log(resources, owner, state=LegState.FAILED)
    async with AsyncTestClient(app_with_spool(settings, tmp_path)) as client:
        for row in (rows[0], rows[0]):
            path = tracked(settings, row, 0, RECIPE)
            await client.get(path, headers=PHONE, follow_redirects=False)
        await copied(tmp_path)
    answer = await owner.client.get("/campaigns/summary.csv")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/csv")
    header, *lines = list(csv.reader(io.StringIO(answer.text.lstrip("\ufeff"))))
    assert len(lines) == 1
    line = dict(zip(header, lines[0], strict=True))
    assert {k: line[k] for k in ("deliveries", "dms_sent", "dms_failed", "link_dms_sent")} == {
        "deliveries": "3",
        "dms_sent": "2",
        "dms_failed": "1",
        "link_dms_sent": "2",
    }
    assert (line["people_tapped"], line["taps"], line["tap_rate_percent"]) == ("1", "2", "50.0")
