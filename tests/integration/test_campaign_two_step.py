"""The editor's "Two-step and follow-up" section through the real app: saving the fields, the
checks against Meta's limits, what activation needs, the live preview's bubbles, duplicate."""

from __future__ import annotations

from collections.abc import AsyncIterator
from html import unescape
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from app.asgi import create_app
from app.db.models import Campaign, CampaignStatus
from app.resources import Resources
from app.settings import Settings
from tests.support.dashboard import (
    add_account,
    csrf_token,
    error_for,
    identity_of,
    sign_up,
    tokens,
)

Client = AsyncTestClient  # type: ignore[type-arg]
TWO_STEP = {
    "opening_dm_enabled": "on",
    "opening_dm_text": "Hi {username}! Tap below for the recipe.",
    "opening_dm_button_title": "Send me the link",
    "follow_gate_enabled": "on",
    "follow_prompt_text": "Follow me first, then tap.",
    "follow_prompt_button_title": "I'm following",
    "dm_trigger_enabled": "on",
    "follow_up_enabled": "on",
    "follow_up_text": "Did you bake it, {username}? {link}",
    "follow_up_delay_minutes": "90",
}


@pytest.fixture
async def editor(
    settings: Settings, resources: Resources, test_env: dict[str, str]
) -> AsyncIterator[tuple[Client, int]]:
    async with AsyncTestClient(create_app(settings)) as client:
        await sign_up(client, "creator@example.com", workspace="Sunny Bakes")
        _, workspace_id = await identity_of(resources, "creator@example.com")
        yield client, await add_account(resources, workspace_id)


async def _submit(client: Client, account_id: int, **changes: Any) -> Any:
    page = await client.get("/campaigns/new")
    data: dict[str, Any] = {
        **tokens(page.text, "/campaigns"),
        "name": "Lemon loaf",
        "account_id": str(account_id),
        "scope": "any_post",
        "match_mode": "whole_word",
        "keywords": ["RECIPE"],
        "dm_text": "Here it is: {link}",
        "button_title_1": "Recipe",
        "button_url_1": "https://sunny.example/lemon",
        "priority": "0",
        "once_per_person": "on",
        **changes,
    }
    return await client.post(
        "/campaigns", data={k: v for k, v in data.items() if v is not None}, follow_redirects=False
    )


async def _campaign(resources: Resources, campaign_id: int) -> Campaign:
    async with resources.sessionmaker() as session:
        campaign = await session.get(Campaign, campaign_id)
        assert campaign is not None
        return campaign


async def test_the_section_saves_its_fields_and_stays_open_when_used(
    editor: tuple[Client, int], resources: Resources
) -> None:
    client, account_id = editor
    new = await client.get("/campaigns/new")
    assert '<details class="card two-step" id="two-step">' in new.text, "collapsed when unused"

    created = await _submit(client, account_id, activate="1", **TWO_STEP)
    assert created.status_code == 303, created.text
    campaign_id = int(created.headers["location"].split("/")[2].split("?")[0])
    campaign = await _campaign(resources, campaign_id)
    assert campaign.status is CampaignStatus.ACTIVE
    assert (campaign.opening_dm_enabled, campaign.follow_gate_enabled) == (True, True)
    assert campaign.opening_dm_text == TWO_STEP["opening_dm_text"]
    assert campaign.opening_dm_button_title == "Send me the link"
    assert campaign.follow_prompt_text == "Follow me first, then tap."
    assert campaign.follow_prompt_button_title == "I'm following"
    assert (campaign.dm_trigger_enabled, campaign.follow_up_enabled) == (True, True)
    assert campaign.follow_up_text == "Did you bake it, {username}? {link}"
    assert campaign.follow_up_delay_minutes == 90

    page = await client.get(f"/campaigns/{campaign_id}")
    assert '<details class="card two-step" id="two-step" open>' in page.text
    assert 'value="Send me the link"' in page.text
    assert "Did you bake it, {username}? {link}</textarea>" in page.text

    # Turning a step off keeps its text for later; the copy takes everything along.
    copy = await client.post(
        f"/campaigns/{campaign_id}/duplicate",
        data=tokens(page.text, f"/campaigns/{campaign_id}/duplicate"),
        follow_redirects=False,
    )
    copy_id = int(copy.headers["location"].split("/")[2].split("?")[0])
    copied = await _campaign(resources, copy_id)
    assert copied.status is CampaignStatus.DRAFT
    assert (copied.opening_dm_text, copied.follow_up_delay_minutes) == (
        TWO_STEP["opening_dm_text"],
        90,
    )


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"opening_dm_text": "Tap for {link}"}, "opening_dm_text", "give the link away"),
        ({"follow_prompt_text": "Follow {name}"}, "follow_prompt_text", "Unknown placeholder"),
        ({"opening_dm_text": "é" * 620 + "{username}"}, "opening_dm_text", "650 of 640"),
        (
            {"opening_dm_button_title": "Send me the link now!"},
            "opening_dm_button_title",
            "at most 20 characters",
        ),
        (
            {"follow_prompt_button_title": "I am following you now"},
            "follow_prompt_button_title",
            "at most 20",
        ),
        ({"follow_up_text": "🍋" * 251}, "follow_up_text", "1004 of 1000 bytes"),
        (
            {"follow_up_text": "Again: {link}", "button_title_1": "", "button_url_1": ""},
            "follow_up_text",
            "{link} needs a link",
        ),
        ({"follow_up_delay_minutes": "1441"}, "follow_up_delay_minutes", "0 to 1440"),
        ({"follow_up_delay_minutes": "soon"}, "follow_up_delay_minutes", "whole number"),
        (
            {"match_mode": "any_comment", "keywords": None},
            "dm_trigger_enabled",
            "needs keywords",
        ),
    ],
)
async def test_two_step_fields_are_checked_against_metas_limits(
    editor: tuple[Client, int], changes: dict[str, Any], field: str, message: str
) -> None:
    client, account_id = editor
    response = await _submit(client, account_id, **(TWO_STEP | changes))
    assert response.status_code == 422
    assert message in unescape(error_for(response.text, field) or ""), response.text
    assert '<details class="card two-step" id="two-step" open>' in response.text


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        (
            {"opening_dm_enabled": "on", "opening_dm_text": "", "opening_dm_button_title": ""},
            "opening_dm_button_title",
            "Give the opening DM's button a title",
        ),
        (
            {"follow_gate_enabled": "on", "follow_prompt_text": " "},
            "follow_prompt_text",
            "asks people to follow",
        ),
        (
            {"follow_up_enabled": "on", "follow_up_text": "Thanks!"},
            "follow_up_enabled",
            "only go out after a button tap or a DM",
        ),
        ({"follow_up_enabled": "on", "follow_up_text": ""}, "follow_up_text", "or turn it off"),
    ],
)
async def test_going_live_needs_what_the_switched_on_steps_send(
    editor: tuple[Client, int],
    resources: Resources,
    changes: dict[str, Any],
    field: str,
    message: str,
) -> None:
    client, account_id = editor
    draft = await _submit(client, account_id, **changes)
    assert draft.status_code == 303, "a draft may be incomplete"
    live = await _submit(client, account_id, activate="1", **changes)
    assert live.status_code == 422
    assert message in unescape(error_for(live.text, field) or ""), live.text


async def test_the_preview_shows_the_opening_dm_and_the_prompt_before_the_link(
    editor: tuple[Client, int],
) -> None:
    client, _ = editor
    page = await client.get("/campaigns/new")
    headers = {"x-csrftoken": csrf_token(page.text), "hx-request": "true"}

    async def preview(**data: str) -> Any:
        return await client.post("/campaigns/preview", data=data, headers=headers)

    response = await preview(
        dm_text="Here it is: {link}",
        button_title_1="Recipe",
        button_url_1="https://sunny.example/lemon",
        **TWO_STEP,
    )
    html = unescape(response.text)
    opening = html.index('id="preview-opening"')
    prompt = html.index('id="preview-prompt"')
    reveal = html.index('id="preview-bubble"')
    follow_up = html.index('id="preview-follow-up"')
    assert opening < prompt < reveal < follow_up
    assert "Hi jane.doe! Tap below for the recipe." in html
    assert ">Send me the link</span>" in html
    assert ">I'm following</span>" in html
    assert "After the tap, once they follow you: the link" in html
    assert "Did you bake it, jane.doe? https://sunny.example/lemon" in html
    assert "90 minutes later" in html

    plain = await preview(dm_text="Hi", opening_dm_text="Tap for {link}")
    assert 'id="preview-opening"' not in plain.text, "only switched-on steps are shown"
    wrong = await preview(dm_text="Hi", opening_dm_enabled="on", opening_dm_text="Tap for {link}")
    assert "give the link away" in wrong.text
