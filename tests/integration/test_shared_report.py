"""Shared campaign reports: an owner makes a read-only link, anyone with it sees the numbers
and no one who commented, a revoked or altered link is a friendly 404, only the token's hash
is stored, and nobody but an owner makes or revokes one.

The app runs in-process against the run's PostgreSQL and Redis, through CSRF, the Redis
sessions and the one-time keys; the rows are written the way the engine writes them.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy import text, update

from app.asgi import create_app
from app.clicks.recorder import SpooledClick, copy_clicks
from app.clicks.visitors import Visit
from app.db.models import (
    Campaign,
    LegState,
    LinkVisit,
    MissReason,
    Role,
    Workspace,
    WorkspaceMember,
)
from app.resources import Resources
from app.settings import Settings
from tests.support.dashboard import csrf_token, tokens
from tests.support.log_data import (
    Creator,
    add_comment,
    add_log,
    add_member,
    other_workspace,
    signed_in_as,
    signed_in_creator,
)

HTML = {"accept": "text/html"}
# Distinctive names and ids of the people who commented: none may appear on the report.
FANS = ("zq_matched_fan_one", "zq_matched_fan_two", "zq_missed_fan", "zq_sent_fan_a")
FAN_IDS = ("9071000000000001", "9071000000000002", "9071000000000003")
URL = re.compile(r'value="(https?://[^"]+/r/([A-Za-z0-9_-]+))"')


@pytest.fixture
async def owner(settings: Settings, resources: Resources) -> AsyncIterator[Creator]:
    async with signed_in_creator(settings, resources) as creator:
        yield creator


def _create_path(creator: Creator) -> str:
    return f"/campaigns/{creator.campaign_id}/report-links"


async def _create(creator: Creator, **headers: str) -> Any:
    page = await creator.client.get(f"/campaigns/{creator.campaign_id}")
    return await creator.client.post(
        _create_path(creator),
        data=tokens(page.text, _create_path(creator)),
        headers={**HTML, **headers},
    )


def _link_in(html: str) -> tuple[str, str]:
    match = URL.search(html)
    assert match, "no report link in the answer"
    return match.group(1), match.group(2)


async def _seed(resources: Resources, creator: Creator) -> None:
    """Six comments on the campaign's posts since it went live (four it matched), four
    deliveries (two sent, one refused, one skipped), four taps by two people and a preview."""
    live = datetime.now(UTC) - timedelta(days=1)
    async with resources.sessionmaker() as session, session.begin():
        await session.execute(
            update(Campaign).where(Campaign.id == creator.campaign_id).values(activated_at=live)
        )

    def decided(verdict: str) -> dict[str, Any]:
        considered = {"campaign_id": creator.campaign_id, "name": "Lemon loaf", "verdict": verdict}
        return {"campaign_id": None, "considered": [considered]}

    for name in FANS:
        await add_comment(
            resources,
            creator.account_id,
            username=name,
            campaign_id=creator.campaign_id,
            decision=decided("won"),
        )
    for _ in range(2):
        await add_comment(
            resources,
            creator.account_id,
            username="zq_missed_fan",
            missed=MissReason.NO_KEYWORD,
            decision=decided("no_keyword"),
        )
    sent_a = await add_log(resources, creator, username="zq_sent_fan_a", recipient_id=FAN_IDS[0])
    sent_b = await add_log(resources, creator, username="zq_sent_fan_b", recipient_id=FAN_IDS[1])
    await add_log(resources, creator, state=LegState.FAILED, username="zq_failed_fan")
    await add_log(
        resources,
        creator,
        state=LegState.SKIPPED_DEDUP,
        username="zq_skipped_fan",
        recipient_id=FAN_IDS[2],
    )
    visits = [
        (sent_a, FAN_IDS[0], LinkVisit.CLICK),
        (sent_a, FAN_IDS[0], LinkVisit.CLICK),
        (sent_a, FAN_IDS[0], LinkVisit.CLICK),
        (sent_b, FAN_IDS[1], LinkVisit.CLICK),
        (sent_b, FAN_IDS[1], LinkVisit.PREVIEW),
    ]
    # Recorded as the redirect's copier records them (the rows and the kept counts).
    await copy_clicks(
        resources.engine,
        [
            SpooledClick(
                key=hashlib.sha256(f"click-{n}".encode()).digest()[:16],
                dm_log_id=dm_log_id,
                button=0,
                visit=Visit(visit.value),
                at=datetime.now(UTC),
            )
            for n, (dm_log_id, _recipient, visit) in enumerate(visits)
        ],
    )


def _stat(html: str, stat_id: str) -> str:
    match = re.search(rf'id="{stat_id}"><span class="stat-number">([^<]*)<', html)
    assert match, f"no {stat_id} on the report"
    return match.group(1)


async def _report_rows(resources: Resources) -> list[Any]:
    async with resources.engine.connect() as conn:
        return list((await conn.execute(text("SELECT * FROM campaign_report_links"))).all())


async def test_an_owner_shares_a_report_with_totals_and_no_one_who_commented(
    settings: Settings, resources: Resources, owner: Creator
) -> None:
    await _seed(resources, owner)
    async with resources.sessionmaker() as session, session.begin():
        await session.execute(
            update(Workspace)
            .where(Workspace.id == owner.workspace_id)
            .values(time_zone="Asia/Tokyo")
        )
    made = await _create(owner)
    assert made.status_code == 200, made.text
    url, token = _link_in(made.text)
    assert url.startswith(settings.public_base_url.rstrip("/") + "/r/")
    assert len(token) == 43  # secrets.token_urlsafe(32)
    assert "only time the link is shown" in made.text

    async with AsyncTestClient(create_app(settings)) as stranger:  # signed in nowhere
        report = await stranger.get(f"/r/{token}")
    assert report.status_code == 200, report.text
    html = report.text
    assert "Lemon loaf" in html
    # Its times are in the workspace's zone, UTC on hover, like the dashboard's.
    as_of = re.search(r'id="report-as-of">Figures as of <time[^>]*title="([^"]+)"', html)
    assert as_of
    assert "Asia/Tokyo" in as_of.group(1)
    assert "UTC" in as_of.group(1)
    assert [_stat(html, i) for i in ("total-seen", "total-matched", "total-sent")] == [
        "6",
        "4",
        "2",
    ]
    assert [_stat(html, i) for i in ("total-failed", "total-skipped")] == ["1", "1"]
    assert [_stat(html, i) for i in ("total-people-tapped", "total-taps")] == ["2", "4"]
    # The campaign page's funnel, the same numbers step by step.
    steps = dict(
        re.findall(
            r'data-step="(\w+)">\s*<th[^>]*>[^<]*(?:<span[^>]*>[^<]*</span>)?'
            r'</th>\s*<td class="n-count">(\d+)',
            html,
        )
    )
    assert steps == {"seen": "6", "matched": "4", "sent": "2", "clicked": "2"}
    # The charts: DMs and taps over the last 30 days, with the numbers beside them.
    assert 'id="chart-deliveries"' in html
    assert 'id="chart-funnel"' in html
    assert re.search(r'class="n-sent">2<', html)
    assert re.search(r'class="n-taps">4<', html)
    # Their range switch is a plain link back to this page (it loads no script).
    assert f'href="/r/{token}?range=24h"' in html
    async with AsyncTestClient(create_app(settings)) as stranger:
        hours = await stranger.get(f"/r/{token}?range=24h")
        odd = await stranger.get(f"/r/{token}?range=%F0%9F%8D%8B")
    assert hours.status_code == 200
    assert re.search(r'data-range="24h" class="active"', hours.text)
    assert odd.status_code == 200  # an odd range is the default one, never an error
    for who in (*FANS, "zq_sent_fan_b", "zq_failed_fan", "zq_skipped_fan", *FAN_IDS):
        assert who not in html, f"{who} is on the shared report"
    assert report.headers["referrer-policy"] == "no-referrer"
    assert "noindex" in report.headers["x-robots-tag"]
    assert report.headers["cache-control"] == "no-store"
    assert "set-cookie" not in report.headers
    assert "<form" not in html
    assert "<script" not in html


async def test_the_report_page_sets_no_cookie_for_a_signed_in_browser(
    owner: Creator,
) -> None:
    _, token = _link_in((await _create(owner)).text)
    report = await owner.client.get(f"/r/{token}")
    assert report.status_code == 200
    assert "set-cookie" not in report.headers
    assert "sunny@example.com" not in report.text  # no dashboard header on it


async def test_only_the_hash_is_stored_and_a_repeat_does_not_show_the_link_again(
    resources: Resources, owner: Creator
) -> None:
    page = await owner.client.get(f"/campaigns/{owner.campaign_id}")
    form = tokens(page.text, _create_path(owner))
    first = await owner.client.post(_create_path(owner), data=form, headers=HTML)
    _, token = _link_in(first.text)
    rows = await _report_rows(resources)
    assert len(rows) == 1
    assert rows[0].token_hash == hashlib.sha256(token.encode()).hexdigest()
    assert rows[0].campaign_id == owner.campaign_id
    assert rows[0].created_by == owner.user_id
    assert rows[0].revoked_at is None
    assert token not in repr(tuple(rows[0]))
    async with resources.engine.connect() as conn:
        keys = (await conn.execute(text("SELECT * FROM idempotency_keys"))).all()
    assert keys
    assert token not in repr([tuple(row) for row in keys])

    # The same form again (a reload, a double click): one link, its address not shown again.
    again = await owner.client.post(
        _create_path(owner), data=form, headers=HTML, follow_redirects=True
    )
    assert again.status_code == 200
    assert token not in again.text
    assert 'id="report-made-again"' in again.text
    assert len(await _report_rows(resources)) == 1


async def test_a_revoked_link_is_a_friendly_404_at_once(
    settings: Settings, resources: Resources, owner: Creator
) -> None:
    _, token = _link_in((await _create(owner)).text)
    link_id = (await _report_rows(resources))[0].id
    page = await owner.client.get(f"/campaigns/{owner.campaign_id}")
    assert f'data-report-link-id="{link_id}"' in page.text
    revoke = f"/campaigns/{owner.campaign_id}/report-links/{link_id}/revoke"
    revoked = await owner.client.post(
        revoke, data=tokens(page.text, revoke), headers=HTML, follow_redirects=False
    )
    assert revoked.status_code == 303, revoked.text
    async with AsyncTestClient(create_app(settings)) as stranger:
        gone = await stranger.get(f"/r/{token}")
    assert gone.status_code == 404
    assert 'id="report-not-found"' in gone.text
    assert "Lemon loaf" not in gone.text
    assert gone.headers["referrer-policy"] == "no-referrer"
    assert (await _report_rows(resources))[0].revoked_at is not None
    after = await owner.client.get(f"/campaigns/{owner.campaign_id}")
    assert f'data-report-link-id="{link_id}"' not in after.text
    assert 'id="no-report-links"' in after.text


async def test_tampered_and_unknown_tokens_are_the_same_friendly_404(
    settings: Settings, owner: Creator
) -> None:
    _, token = _link_in((await _create(owner)).text)
    flipped = token[:-1] + ("A" if token[-1] != "A" else "B")
    async with AsyncTestClient(create_app(settings)) as stranger:
        for path in (
            f"/r/{flipped}",
            f"/r/{token[:-1]}",
            f"/r/{token}x",
            "/r/nope",
            f"/r/{'a' * 3000}",
            "/r/%00",
        ):
            answer = await stranger.get(path)
            assert answer.status_code == 404, (path, answer.status_code)
            assert "Lemon loaf" not in answer.text
            assert "set-cookie" not in answer.headers
        friendly = await stranger.get(f"/r/{flipped}")
    assert 'id="report-not-found"' in friendly.text
    assert "<html" in friendly.text


async def test_with_htmx_the_card_swaps_in_place(owner: Creator) -> None:
    page = await owner.client.get(f"/campaigns/{owner.campaign_id}")
    htmx = {"hx-request": "true", "x-csrftoken": csrf_token(page.text)}
    made = await owner.client.post(
        _create_path(owner), data=tokens(page.text, _create_path(owner)), headers=htmx
    )
    assert made.status_code == 200
    assert "<html" not in made.text
    assert 'id="report-links"' in made.text
    assert 'data-copy="#new-report-url"' in made.text
    _link_in(made.text)
    link = re.search(r'data-report-link-id="(\d+)"', made.text)
    assert link
    revoke = f"/campaigns/{owner.campaign_id}/report-links/{link.group(1)}/revoke"
    page = await owner.client.get(f"/campaigns/{owner.campaign_id}")
    revoked = await owner.client.post(revoke, data=tokens(page.text, revoke), headers=htmx)
    assert revoked.status_code == 200
    assert 'id="no-report-links"' in revoked.text
    assert "<html" not in revoked.text


@pytest.mark.parametrize("role", [Role.MEMBER, Role.ADMIN])
async def test_only_an_owner_makes_or_revokes_a_link(
    settings: Settings, resources: Resources, owner: Creator, role: Role
) -> None:
    _, token = _link_in((await _create(owner)).text)
    link_id = (await _report_rows(resources))[0].id
    email = f"{role.value}@example.com"
    await add_member(resources, owner.workspace_id, email)
    async with resources.sessionmaker() as session, session.begin():
        await session.execute(
            update(WorkspaceMember)
            .where(WorkspaceMember.workspace_id == owner.workspace_id)
            .where(WorkspaceMember.user_id != owner.user_id)
            .values(role=role)
        )
    async with signed_in_as(settings, email) as other:
        page = await other.get(f"/campaigns/{owner.campaign_id}")
        assert page.status_code == 200
        assert 'id="report-owners-only"' in page.text
        assert 'id="create-report-link"' not in page.text
        assert "revoke-report" not in page.text
        # The forms posted anyway (with this page's valid tokens) are refused by the server.
        fields = {"_csrf_token": csrf_token(page.text), "_idem": "k" * 24}
        made = await other.post(_create_path(owner), data=fields, headers=HTML)
        assert made.status_code == 403
        revoke = f"/campaigns/{owner.campaign_id}/report-links/{link_id}/revoke"
        revoked = await other.post(revoke, data={**fields, "_idem": "r" * 24}, headers=HTML)
        assert revoked.status_code == 403
    rows = await _report_rows(resources)
    assert len(rows) == 1
    assert rows[0].revoked_at is None
    async with AsyncTestClient(create_app(settings)) as stranger:
        assert (await stranger.get(f"/r/{token}")).status_code == 200


async def test_another_workspace_can_neither_share_nor_revoke_this_campaign(
    settings: Settings, resources: Resources, owner: Creator
) -> None:
    await _create(owner)
    link_id = (await _report_rows(resources))[0].id
    north = await other_workspace(settings, resources)
    async with signed_in_as(settings, "north@example.com") as client:
        page = await client.get(f"/campaigns/{north.campaign_id}")
        fields = {"_csrf_token": csrf_token(page.text), "_idem": "n" * 24}
        made = await client.post(_create_path(owner), data=fields, headers=HTML)
        assert made.status_code == 404
        revoke = f"/campaigns/{owner.campaign_id}/report-links/{link_id}/revoke"
        revoked = await client.post(revoke, data={**fields, "_idem": "m" * 24}, headers=HTML)
        assert revoked.status_code == 404
    rows = await _report_rows(resources)
    assert len(rows) == 1
    assert rows[0].revoked_at is None


async def test_report_links_are_bounded_per_campaign(resources: Resources, owner: Creator) -> None:
    from app.delivery_log.report_links import MAX_ACTIVE_LINKS, create_report_link

    async with resources.sessionmaker() as session, session.begin():
        for _ in range(MAX_ACTIVE_LINKS):
            assert await create_report_link(
                session,
                workspace_id=owner.workspace_id,
                campaign_id=owner.campaign_id,
                user_id=owner.user_id,
            )
    page = await owner.client.get(f"/campaigns/{owner.campaign_id}")
    assert 'id="report-links-full"' in page.text
    assert 'id="create-report-link"' not in page.text
    refused = await _create_with_fresh_form(owner)
    assert refused.status_code == 409
    assert len(await _report_rows(resources)) == MAX_ACTIVE_LINKS


async def _create_with_fresh_form(creator: Creator) -> Any:
    page = await creator.client.get(f"/campaigns/{creator.campaign_id}")
    fields = {"_csrf_token": csrf_token(page.text), "_idem": "f" * 24}
    return await creator.client.post(_create_path(creator), data=fields, headers=HTML)


async def test_every_address_under_r_is_the_report_s_own_404(settings: Settings) -> None:
    # Whatever refuses it (no route, the edge checks, the method), a link under /r/ that opens
    # no report gets the report's page and headers, never the dashboard's 404.
    async with AsyncTestClient(create_app(settings)) as stranger:
        for method, path in (
            ("GET", "/r/a/b"),
            ("GET", "/r/a/b/c/d"),
            ("GET", f"/r/{'A' * 43}/extra"),
            ("GET", "/r/"),
            ("GET", "/r"),
            ("GET", f"/r/{'a' * 300}"),
            ("GET", f"/r/{'a' * 3000}"),
            ("GET", "/r/%00"),
            ("GET", "/r/a%2Fb"),
            ("GET", "/r/..%2F..%2Fetc%2Fpasswd"),
            ("GET", "/r/%F0%9F%94%A5%E2%80%8D"),
            ("GET", "/r/%FF%FE"),
            ("GET", "/r/x?range=%00"),
            ("POST", f"/r/{'A' * 43}"),
            ("DELETE", "/r/a/b"),
        ):
            answer = await stranger.request(method, path, headers=HTML)
            where = (method, path, answer.status_code)
            assert answer.status_code in (400, 404, 405), where
            assert 'id="report-not-found"' in answer.text, where
            assert "set-cookie" not in answer.headers, where
            assert answer.headers["referrer-policy"] == "no-referrer", where
            assert "noindex" in answer.headers["x-robots-tag"], where
            assert answer.headers["cache-control"] == "no-store", where
        # A client that asks for JSON gets the same page: the link is for people.
        plain = await stranger.get("/r/a/b", headers={"accept": "application/json"})
        assert plain.status_code == 404
        assert 'id="report-not-found"' in plain.text
        # Only the shared report's addresses: the dashboard's own 404 is unchanged.
        other = await stranger.get("/rx/a", headers=HTML)
        assert other.status_code == 404
        assert 'id="report-not-found"' not in other.text
