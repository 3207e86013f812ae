"""A campaign's funnel agrees with the rows: comments through the real ingest (the ledger's
decisions, the deliveries it makes), then taps, links and clicks written as the engine and the
click copier write them; the counts, the rates, the misses and the days (in the workspace's
zone) are checked exactly, on the data and on the campaign page."""

from __future__ import annotations

import hashlib
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, time, timedelta
from itertools import count
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy import select, text, update

from app.clicks.recorder import SpooledClick, copy_clicks
from app.clicks.visitors import Visit
from app.db.models import (
    Campaign,
    DmLog,
    LegState,
    LinkVisit,
    MessageKind,
    SeenVia,
    TriggerKind,
    Workspace,
)
from app.delivery.intake.comments import ingest_comments
from app.delivery_log.funnel import Funnel, campaign_funnel
from app.instagram.webhook_payload import comment_from_graph
from app.resources import Resources
from app.settings import Settings
from tests.support.dashboard import SUNNY
from tests.support.log_data import Creator, add_campaign, add_log, signed_in_creator

TOKYO = ZoneInfo("Asia/Tokyo")
POST = "17918195224117851"
_ids = count(1)

JANE, OMAR, LEA, BOB, KIM, TOM = "111", "222", "333", "444", "555", "666"


@pytest.fixture
async def owner(settings: Settings, resources: Resources) -> AsyncIterator[Creator]:
    async with signed_in_creator(settings, resources) as creator:
        yield creator


async def ingest(
    resources: Resources, person: str, words: str, *, parent: str | None = None
) -> None:
    data = {
        "id": f"1787{next(_ids):012d}",
        "text": words,
        "timestamp": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S+0000"),
        "from": {"id": person, "username": f"fan{person}"},
    }
    if parent:
        data["parent_id"] = parent
    comment = comment_from_graph(SUNNY, POST, data, fallback_time=datetime.now(UTC))
    async with resources.sessionmaker() as session, session.begin():
        await ingest_comments(session, [comment], via=SeenVia.WEBHOOK)


async def deliveries(resources: Resources, campaign_id: int) -> dict[str, int]:
    """The campaign's comment deliveries, by recipient (the last one of a person wins)."""
    async with resources.sessionmaker() as session:
        rows = await session.execute(
            select(DmLog.recipient_id, DmLog.id)
            .where(DmLog.campaign_id == campaign_id, DmLog.trigger_kind == TriggerKind.COMMENT)
            .order_by(DmLog.id)
        )
        return {str(recipient): log_id for recipient, log_id in rows.tuples()}


async def set_row(resources: Resources, log_id: int, **values: object) -> None:
    async with resources.sessionmaker() as session, session.begin():
        await session.execute(update(DmLog).where(DmLog.id == log_id).values(**values))


async def click(
    resources: Resources,
    log_id: int,
    *,
    button: int,
    at: datetime,
    visit: LinkVisit = LinkVisit.CLICK,
) -> None:
    """A visit recorded as the redirect's copier records it (the row and the kept counts);
    the person and campaign come from the delivery."""
    await copy_clicks(
        resources.engine,
        [
            SpooledClick(
                key=hashlib.sha256(f"{log_id}:{next(_ids)}".encode()).digest()[:16],
                dm_log_id=log_id,
                button=button,
                visit=Visit(visit.value),
                at=at,
            )
        ],
    )


def tokyo_midnight(now: datetime) -> datetime:
    return datetime.combine(now.astimezone(TOKYO).date(), time.min, TOKYO)


async def seed(resources: Resources, owner: Creator, now: datetime) -> dict[str, int]:
    """The story the numbers tell; returns the rows a test looks at again."""
    campaign = owner.campaign_id
    async with resources.sessionmaker() as session, session.begin():
        await session.execute(
            update(Campaign)
            .where(Campaign.id == campaign)
            .values(
                opening_dm_enabled=True,
                follow_gate_enabled=True,
                excluded_keywords=["free"],
                buttons=[
                    {"title": "Recipe", "url": "https://sunny.example/lemon"},
                    {"title": "Shop", "url": "https://shop.example/loaf"},
                ],
                created_at=now - timedelta(days=3),
            )
        )
        await session.execute(
            update(Workspace)
            .where(Workspace.id == owner.workspace_id)
            .values(time_zone="Asia/Tokyo")
        )
    # Another campaign on the account, ranked first for bread: it wins "bread recipe".
    await add_campaign(
        resources, owner.workspace_id, owner.account_id, "Bread", keywords=["bread"], priority=5
    )
    await ingest(resources, JANE, "RECIPE please")  # answered
    await ingest(resources, OMAR, "recipe!")  # answered
    await ingest(resources, JANE, "recipe again")  # answered; the person already had it
    await ingest(resources, LEA, "recipe")  # answered; Instagram refuses
    await ingest(resources, BOB, "bread recipe")  # matched, lost to Bread
    await ingest(resources, KIM, "recipe free")  # excluded
    await ingest(resources, TOM, "hello")  # no keyword
    await ingest(resources, TOM, "recipe", parent="17870000000000001")  # a reply: not seen
    rows = await deliveries(resources, campaign)
    jane_first = min(await _ids_of(resources, campaign, JANE))
    kind = MessageKind.OPENING_DM
    await set_row(resources, jane_first, pr_state=LegState.SENT, message_kind=kind)
    await set_row(resources, rows[OMAR], pr_state=LegState.SENT, message_kind=kind)
    await set_row(resources, rows[JANE], pr_state=LegState.SKIPPED_DEDUP)
    await set_row(resources, rows[LEA], pr_state=LegState.FAILED, message_kind=kind)
    # Tom's "hello" came in yesterday evening, Tokyo time (after 15:00 UTC: today's date there).
    yesterday_evening = tokyo_midnight(now) - timedelta(minutes=30)
    async with resources.sessionmaker() as session, session.begin():
        await session.execute(
            text("UPDATE comments SET created_at = :at WHERE text = 'hello'"),
            {"at": yesterday_evening},
        )

    def tap(person: str, payload: str, kind: MessageKind, state: LegState) -> dict[str, object]:
        return {
            "trigger_kind": TriggerKind.POSTBACK,
            "trigger_payload": payload,
            "recipient_id": person,
            "message_kind": kind,
            "state": state,
        }

    opening = f"followcheck:{campaign}:open"
    # Jane taps the opening DM twice (the second is a new tap row); she follows: the link.
    jane_link = await add_log(
        resources, owner, **tap(JANE, opening, MessageKind.REVEAL, LegState.SENT)
    )
    await add_log(
        resources, owner, **tap(JANE, opening, MessageKind.REVEAL, LegState.SKIPPED_DEDUP)
    )
    # Omar taps, does not follow: the follow prompt; his "I'm following" is no opening tap.
    await add_log(resources, owner, **tap(OMAR, opening, MessageKind.FOLLOW_PROMPT, LegState.SENT))
    await add_log(
        resources,
        owner,
        **tap(OMAR, f"followcheck:{campaign}", MessageKind.FOLLOW_PROMPT, LegState.SENT),
    )
    # Jane: two taps on the recipe (one last night in Tokyo), one on the shop, one preview
    # fetch, and a tap 40 days ago (in the total, before the days shown).
    await click(resources, jane_link, button=0, at=now)
    await click(resources, jane_link, button=0, at=yesterday_evening)
    await click(resources, jane_link, button=1, at=now)
    await click(resources, jane_link, button=0, at=now, visit=LinkVisit.PREVIEW)
    await click(resources, jane_link, button=0, at=now - timedelta(days=40))
    return {"jane_link": jane_link}


async def _ids_of(resources: Resources, campaign_id: int, person: str) -> list[int]:
    async with resources.sessionmaker() as session:
        found = await session.scalars(
            select(DmLog.id).where(
                DmLog.campaign_id == campaign_id,
                DmLog.recipient_id == person,
                DmLog.trigger_kind == TriggerKind.COMMENT,
            )
        )
        return list(found)


async def funnel_of(resources: Resources, owner: Creator, now: datetime) -> Funnel:
    async with resources.sessionmaker() as session:
        campaign = await session.get_one(Campaign, owner.campaign_id)
        return await campaign_funnel(session, campaign, zone=TOKYO, now=now)


async def test_the_funnel_agrees_with_the_rows(resources: Resources, owner: Creator) -> None:
    now = datetime.now(UTC)
    await seed(resources, owner, now)
    funnel = await funnel_of(resources, owner, now)

    assert [(s.key, s.count, s.rate_percent) for s in funnel.steps] == [
        ("seen", 7, None),
        ("matched", 4, 57.1),
        ("sent", 2, 50.0),
        ("tapped", 2, 100.0),
        ("passed", 1, 50.0),
        ("clicked", 1, 100.0),
    ]
    # The same numbers straight from the tables.
    async with resources.engine.connect() as conn:
        matched = (
            await conn.execute(
                text(
                    "SELECT count(*) FROM dm_logs WHERE campaign_id = :c "
                    "AND trigger_kind = 'comment'"
                ),
                {"c": owner.campaign_id},
            )
        ).scalar_one()
        people = (
            await conn.execute(
                text(
                    "SELECT count(DISTINCT recipient_id) FROM link_clicks "
                    "WHERE campaign_id = :c AND visit = 'click'"
                ),
                {"c": owner.campaign_id},
            )
        ).scalar_one()
    assert (funnel.count("matched"), funnel.count("clicked")) == (matched, people)

    assert [(m.code, m.count) for m in funnel.unanswered] == [
        ("lost", 1),
        ("excluded", 1),
        ("no_keyword", 1),
    ]
    assert sorted((m.code, m.count) for m in funnel.not_sent) == [
        ("FAILED", 1),
        ("SKIPPED_DEDUP", 1),
    ]
    assert [(b.title, b.people, b.taps, b.rate_percent) for b in funnel.buttons] == [
        ("Recipe", 1, 3, 100.0),
        ("Shop", 1, 1, 100.0),
    ]

    today = now.astimezone(TOKYO).date()
    yesterday = today - timedelta(days=1)
    assert [d.day for d in funnel.days] == [today, yesterday]
    assert funnel.days[0].counts == {
        "seen": 6,
        "matched": 4,
        "sent": 2,
        "tapped": 2,
        "passed": 1,
        "clicked": 1,
    }
    assert funnel.days[1].counts == {
        "seen": 1,
        "matched": 0,
        "sent": 0,
        "tapped": 0,
        "passed": 0,
        "clicked": 1,
    }


async def test_a_plain_campaign_shows_no_tap_or_gate_step(
    resources: Resources, owner: Creator
) -> None:
    await ingest(resources, JANE, "recipe")
    await ingest(resources, OMAR, "recipe")
    rows = await deliveries(resources, owner.campaign_id)
    await set_row(resources, rows[JANE], pr_state=LegState.SENT, message_kind=MessageKind.REVEAL)
    await click(resources, rows[JANE], button=0, at=datetime.now(UTC))
    funnel = await funnel_of(resources, owner, datetime.now(UTC))
    assert [(s.key, s.count, s.rate_percent) for s in funnel.steps] == [
        ("seen", 2, None),
        ("matched", 2, 100.0),
        ("sent", 1, 50.0),
        ("clicked", 1, 100.0),
    ]
    assert [(m.code, m.words, m.count) for m in funnel.not_sent] == [
        ("UNSETTLED", "Waiting or being sent", 1)
    ]


async def test_the_campaign_page_shows_the_funnel(resources: Resources, owner: Creator) -> None:
    await seed(resources, owner, datetime.now(UTC))
    page = await owner.client.get(f"/campaigns/{owner.campaign_id}")
    assert page.status_code == 200
    html = page.text
    steps = re.findall(
        r'<tr data-step="(\w+)">.*?<td class="n-count">(\d+) .*?<td class="n-rate">([^<]*)</td>',
        html,
        re.S,
    )
    assert steps == [
        ("seen", "7", "—"),
        ("matched", "4", "57.1%"),
        ("sent", "2", "50.0%"),
        ("tapped", "2", "100.0%"),
        ("passed", "1", "50.0%"),
        ("clicked", "1", "100.0%"),
    ]
    assert "also matched, but ranked lower" in html
    assert "Asia/Tokyo" in html
    # No commenter's name anywhere in the funnel.
    funnel_html = html[
        html.index('id="funnel"') : html.index("</section>", html.index('id="funnel"'))
    ]
    assert "fan" not in funnel_html
