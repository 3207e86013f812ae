"""The log says when a number code matched only because look-alike letters were read as digits:
a comment's match decision, and a DM's or story reply's timeline."""

from __future__ import annotations

from collections.abc import AsyncIterator
from html import unescape

import pytest

from app.db.models import LegState, MessageKind, TriggerKind
from app.resources import Resources
from app.settings import Settings
from tests.support.log_data import Creator, add_comment, add_log, signed_in_creator

HTML = {"accept": "text/html"}
NOTE = "letters that look like digits count as digits in a number code"


@pytest.fixture
async def owner(
    settings: Settings, resources: Resources, test_env: dict[str, str]
) -> AsyncIterator[Creator]:
    async with signed_in_creator(settings, resources) as creator:
        yield creator


async def timeline(owner: Creator, row: int) -> str:
    response = await owner.client.get(f"/log/{row}", headers=HTML)
    assert response.status_code == 200
    return unescape(response.text)


async def test_a_comment_read_as_a_code_says_so_in_its_match_decision(
    resources: Resources, owner: Creator
) -> None:
    decision = {
        "campaign_id": owner.campaign_id,
        "campaign_name": "Lemon loaf",
        "matched_keyword": "2024",
        "miss_reason": None,
        "read_as_digits": "2O24",
        "considered": [
            {"campaign_id": owner.campaign_id, "name": "Lemon loaf", "verdict": "won",
             "keyword": "2024", "read_as_digits": "2O24"},
        ],
    }  # fmt: skip
    comment = await add_comment(resources, owner.account_id, text="code 2O24", decision=decision)
    read = await add_log(resources, owner, comment_row_id=comment, matched_keyword="2024")
    page = await timeline(owner, read)
    assert "The comment wrote “2O24”" in page
    assert NOTE in page
    assert "(“2024”, read from “2O24”)" in page

    plain = await add_comment(
        resources,
        owner.account_id,
        text="code 2024",
        decision=decision | {"read_as_digits": None, "considered": []},
    )
    typed = await add_log(resources, owner, comment_row_id=plain, matched_keyword="2024")
    assert NOTE not in await timeline(owner, typed)


@pytest.mark.parametrize("kind", [TriggerKind.MESSAGE, TriggerKind.STORY_REPLY])
async def test_a_dm_or_story_reply_read_as_a_code_says_so(
    resources: Resources, owner: Creator, kind: TriggerKind
) -> None:
    prefix = "dm" if kind is TriggerKind.MESSAGE else "story"
    read = await add_log(
        resources,
        owner,
        trigger_kind=kind,
        trigger_id=f"{prefix}:mid-read",
        text="code 2O24 pls",
        matched_keyword="2024",
        username=None,
        message_kind=MessageKind.REVEAL,
        state=LegState.SENT,
    )
    page = await timeline(owner, read)
    assert "It matched the keyword" in page
    assert "“2O24” was read as 2024" in page
    assert NOTE in page

    typed = await add_log(
        resources,
        owner,
        trigger_kind=kind,
        trigger_id=f"{prefix}:mid-typed",
        text="🔥🔥",
        matched_keyword="🔥",
        username=None,
        message_kind=MessageKind.REVEAL,
        state=LegState.SENT,
    )
    page = await timeline(owner, typed)
    assert "It matched the keyword" in page
    assert NOTE not in page
