"""The Misses page explains an emoji keyword that a comment or a story reply held only joined
into another emoji (👨 in the family 👨‍👩‍👧, 🔥 in ❤️‍🔥), in the words *Try a comment* uses.

The comments and the story reply arrive as Meta's webhooks and go through the real ingest
(`run_ingest`), which writes the misses and their decisions; the page is read through the
in-process app as the signed-in owner.
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from html import unescape

import pytest
from sqlalchemy import update

from app.db.models import Campaign, CampaignTrigger, MatchMode
from app.delivery.intake.outbox import run_ingest
from app.resources import Resources
from app.settings import Settings
from tests.support.dashboard import SUNNY
from tests.support.log_data import Creator, add_campaign, signed_in_creator
from tests.support.webhooks import comment_value, comments_body, messaging_body, store_event

HTML = {"accept": "text/html"}
FAMILY = "\U0001f468\u200d\U0001f469\u200d\U0001f467"  # 👨‍👩‍👧
MAN = "\U0001f468"  # 👨
HEART_ON_FIRE = "\u2764\ufe0f\u200d\U0001f525"  # ❤️‍🔥
FIRE = "\U0001f525"  # 🔥
HINT = re.compile(r'<div class="small joined-emoji-hint">([^<]*)</div>')


@pytest.fixture
async def owner(settings: Settings, resources: Resources) -> AsyncIterator[Creator]:
    async with signed_in_creator(settings, resources) as creator:
        yield creator


async def _ingest(resources: Resources, *bodies: bytes) -> None:
    async with resources.sessionmaker() as session, session.begin():
        ids = [await store_event(session, body) for body in bodies]
    await run_ingest(resources, ids)


def _story_reply(mid: str, text: str) -> bytes:
    message = {
        "mid": mid,
        "text": text,
        "reply_to": {"story": {"url": "https://scontent.cdninstagram.com/s", "id": "17900000001"}},
    }
    item = {
        "sender": {"id": "1254459154682919"},
        "recipient": {"id": SUNNY},
        "timestamp": int(time.time() * 1000),
        "message": message,
    }
    return messaging_body(item, account=SUNNY)


def _hints_of(html: str, row_id: str) -> list[str]:
    row = re.search(rf'<tr id="{row_id}".*?</tr>', html, re.S)
    assert row, f"no row {row_id} on the page"
    return [unescape(hint) for hint in HINT.findall(row.group(0))]


def _row_ids(html: str, prefix: str) -> dict[str, str]:
    """Each row's id by the message it shows."""
    found = re.findall(
        rf'<tr id="({prefix}-\d+)".*?<td data-label="(?:Comment|Message)" class="comment-text">'
        r"([^<]*)<",
        html,
        re.S,
    )
    return {unescape(text).strip(): row_id for row_id, text in found}


async def test_the_misses_page_says_an_emoji_keyword_was_joined_into_another(
    resources: Resources, owner: Creator
) -> None:
    live = datetime.now(UTC) - timedelta(hours=1)
    await add_campaign(
        resources, owner.workspace_id, owner.account_id, "Dads", keywords=[MAN], activated_at=live
    )
    fire = await add_campaign(
        resources,
        owner.workspace_id,
        owner.account_id,
        "Hot deals",
        keywords=[FIRE],
        match_mode=MatchMode.CONTAINS,
        activated_at=live,
    )
    await add_campaign(
        resources,
        owner.workspace_id,
        owner.account_id,
        "Story fire",
        keywords=[FIRE],
        trigger=CampaignTrigger.STORY_REPLIES,
        activated_at=live,
    )
    await _ingest(
        resources,
        comments_body(
            comment_value("c-family", f"our {FAMILY}!", username="fan.family"),
            comment_value("c-heart", f"{HEART_ON_FIRE}{HEART_ON_FIRE}", username="fan.heart"),
            comment_value("c-plain", "lovely bread", username="fan.plain"),
            comment_value("c-match", f"{MAN} dad here", username="fan.match"),
            account=SUNNY,
        ),
        _story_reply("aWdf-story-heart", f"so {HEART_ON_FIRE}"),
        _story_reply("aWdf-story-plain", "nice story"),
    )

    page = (await owner.client.get("/log/misses", headers=HTML)).text
    rows = _row_ids(page, "miss")
    assert set(rows) == {f"our {FAMILY}!", HEART_ON_FIRE * 2, "lovely bread"}  # one matched
    assert _hints_of(page, rows[f"our {FAMILY}!"]) == [
        f"For “Dads”: {MAN} appears only joined into {FAMILY}, which counts as an emoji of its "
        f"own. Add {FAMILY} as a keyword too."
    ]
    # In "contains" mode too: an emoji is never found inside another one.
    [heart] = _hints_of(page, rows[HEART_ON_FIRE * 2])
    assert heart.startswith(f"For “Hot deals”: {FIRE} appears only joined into {HEART_ON_FIRE},")
    assert _hints_of(page, rows["lovely bread"]) == []
    assert "Lemon loaf" not in " ".join(HINT.findall(page))  # a text keyword gets no such hint

    stories = (await owner.client.get("/log/misses?kind=stories", headers=HTML)).text
    story_rows = _row_ids(stories, "story-miss")
    assert set(story_rows) == {f"so {HEART_ON_FIRE}", "nice story"}
    [story_hint] = _hints_of(stories, story_rows[f"so {HEART_ON_FIRE}"])
    assert story_hint == (
        f"For “Story fire”: {FIRE} appears only joined into {HEART_ON_FIRE}, which counts as an "
        f"emoji of its own. Add {HEART_ON_FIRE} as a keyword too."
    )
    assert _hints_of(stories, story_rows["nice story"]) == []

    # Once the creator has added the joined emoji, the campaign would answer: no more hint.
    async with resources.sessionmaker() as session, session.begin():
        await session.execute(
            update(Campaign).where(Campaign.id == fire).values(keywords=[FIRE, HEART_ON_FIRE])
        )
    again = (await owner.client.get("/log/misses", headers=HTML)).text
    assert _hints_of(again, _row_ids(again, "miss")[HEART_ON_FIRE * 2]) == []
    assert len(_hints_of(again, _row_ids(again, "miss")[f"our {FAMILY}!"])) == 1
