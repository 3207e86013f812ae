"""The editor's image and card: saved with what was typed once the image's host says it will
do (type, size, a public address), refused with a field error otherwise, previewed as the fan
would see it. The sandbox's `/_media/…` stands in for the creator's image host; loopback is
allowed for it by `IMAGE_CHECK_ALLOW_LOOPBACK`, as in development."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from app.asgi import create_app
from app.campaigns.image_check import NOT_PUBLIC, ImageRefusedError, check_image
from app.db.models import Campaign
from app.resources import Resources
from app.settings import Settings, load_settings
from tests.support.dashboard import (
    LEMON_REEL,
    add_account,
    csrf_token,
    error_for,
    identity_of,
    sandbox_env,
    sign_up,
    tokens,
)
from tests.support.sandbox_process import SandboxProcess, start_sandbox

Client = AsyncTestClient  # type: ignore[type-arg]
OWNER = "sunny@example.com"


@pytest.fixture(scope="module")
def sandbox(test_env: dict[str, str]) -> Iterator[SandboxProcess]:
    with start_sandbox(sandbox_env(test_env)) as process:
        yield process


@pytest.fixture
def media(sandbox: SandboxProcess) -> str:
    return f"{sandbox.base_url}/_media"


@pytest.fixture
async def owner(
    test_env: dict[str, str], resources: Resources
) -> AsyncIterator[tuple[Client, int]]:
    settings = load_settings({**test_env, "IMAGE_CHECK_ALLOW_LOOPBACK": "true"})
    async with AsyncTestClient(create_app(settings)) as client:
        await sign_up(client, OWNER, workspace="Sunny Bakes")
        _, workspace_id = await identity_of(resources, OWNER)
        yield client, await add_account(resources, workspace_id)


def _form(page: str, account_id: int, **changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        **tokens(page, "/campaigns"),
        "name": "Lemon loaf",
        "account_id": str(account_id),
        "scope": "post",
        "media_id": LEMON_REEL,
        "match_mode": "whole_word",
        "keywords": ["RECIPE"],
        "dm_text": "Here it is, {username}!",
        "button_title_1": "Get the recipe",
        "button_url_1": "https://sunny.example/lemon",
        "opening_dm_enabled": "on",
        "opening_dm_text": "Tap for the recipe",
        "opening_dm_button_title": "Send it",
        "once_per_person": "on",
    }
    base.update(changes)
    return {k: v for k, v in base.items() if v is not None}


async def _save(client: Client, account_id: int, **changes: Any) -> Any:
    page = await client.get("/campaigns/new")
    return await client.post(
        "/campaigns", data=_form(page.text, account_id, **changes), follow_redirects=False
    )


async def test_an_image_and_card_are_saved_and_shown_again(
    owner: tuple[Client, int], resources: Resources, media: str
) -> None:
    client, account_id = owner
    saved = await _save(
        client,
        account_id,
        activate="1",
        dm_image_url=f"{media}/cover.png",
        card_enabled="on",
        card_title="Your loaf, {username}",
        card_subtitle="20 minutes",
    )
    assert saved.status_code == 303, error_for(saved.text, "dm_image_url") or saved.text[-2000:]
    campaign_id = int(saved.headers["location"].split("/")[2].split("?")[0])
    async with resources.sessionmaker() as session:
        campaign = await session.get(Campaign, campaign_id)
        assert campaign is not None
        assert campaign.dm_image_url == f"{media}/cover.png"
        assert campaign.card_enabled
        assert (campaign.card_title, campaign.card_subtitle) == (
            "Your loaf, {username}",
            "20 minutes",
        )

    editor = await client.get(f"/campaigns/{campaign_id}")
    assert f'value="{media}/cover.png"' in editor.text
    assert 'id="card_enabled" checked' in editor.text
    # The preview draws the card with its image, title and the campaign's button.
    assert 'id="preview-card"' in editor.text
    assert "Your loaf, jane.doe" in editor.text
    assert f'src="{media}/cover.png"' in editor.text


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("{media}/huge.jpg", "Instagram takes at most 8 MB"),
        ("{media}/page.html", "not a JPEG, PNG or GIF image (the server says text/html)"),
        ("{media}/missing.png", "Nothing is at that link"),
        ("http://sunny.example/a.png", "Use a full https:// link"),
        ("https://10.1.2.3/a.png", NOT_PUBLIC),
        ("https://169.254.169.254/latest/meta-data", NOT_PUBLIC),
        ("https://[fd00::1]/a.png", NOT_PUBLIC),
        ("https://sunny.invalid/a.png", "does not exist"),
    ],
)
async def test_an_image_that_will_not_do_is_a_field_error(
    owner: tuple[Client, int], media: str, url: str, says: str
) -> None:
    client, account_id = owner
    # Without htmx (no JavaScript): the whole page again, the error next to the field.
    refused = await _save(client, account_id, dm_image_url=url.format(media=media))
    assert refused.status_code == 422
    error = error_for(refused.text, "dm_image_url")
    assert error is not None
    assert says in error.replace("&#39;", "'")
    assert "Nothing was saved" in refused.text


async def test_card_limits_are_field_errors(owner: tuple[Client, int]) -> None:
    client, account_id = owner
    refused = await _save(
        client,
        account_id,
        card_enabled="on",
        card_title="t" * 81,
        card_subtitle="s" * 81,
        **{
            field: value
            for i in (2, 3, 4)
            for field, value in (
                (f"button_title_{i}", f"Link {i}"),
                (f"button_url_{i}", f"https://sunny.example/{i}"),
            )
        },
    )
    assert refused.status_code == 422
    assert "at most 80 characters: this is 81" in (error_for(refused.text, "card_title") or "")
    assert "at most 80 characters: this is 81" in (error_for(refused.text, "card_subtitle") or "")
    assert (error_for(refused.text, "buttons") or "").startswith("At most 3 buttons")

    untitled = await _save(client, account_id, card_enabled="on", card_title="")
    assert (error_for(untitled.text, "card_title") or "").startswith("Give the card a title")

    nowhere = await _save(
        client,
        account_id,
        activate="1",
        opening_dm_enabled=None,
        card_enabled="on",
        card_title="Recipe",
    )
    assert nowhere.status_code == 422
    assert "private reply to a comment carries text and buttons only" in (
        error_for(nowhere.text, "card_enabled") or ""
    )


async def test_the_preview_draws_the_image_and_the_card(
    owner: tuple[Client, int], media: str
) -> None:
    client, _ = owner
    page = await client.get("/campaigns/new")
    headers = {"x-csrftoken": csrf_token(page.text), "hx-request": "true"}
    base = {
        "dm_text": "Hi",
        "button_title_1": "Get it",
        "button_url_1": "https://sunny.example/r",
        "opening_dm_enabled": "on",
    }
    image_only = await client.post(
        "/campaigns/preview",
        data={**base, "dm_image_url": f"{media}/cover.png"},
        headers=headers,
    )
    assert image_only.status_code == 200
    assert 'id="preview-image"' in image_only.text
    assert "just before the message" in image_only.text
    assert 'id="preview-card"' not in image_only.text

    card = await client.post(
        "/campaigns/preview",
        data={
            **base,
            "dm_image_url": f"{media}/cover.png",
            "card_enabled": "on",
            "card_title": "Hi {username}",
            "card_subtitle": "s" * 90,
        },
        headers=headers,
    )
    assert 'id="preview-card"' in card.text
    assert "Hi jane.doe" in card.text
    assert 'href="https://sunny.example/r"' in card.text
    assert 'id="preview-card-subtitle-error"' in card.text

    unsafe = await client.post(
        "/campaigns/preview",
        data={**base, "dm_image_url": "javascript:alert(1)", "opening_dm_enabled": ""},
        headers=headers,
    )
    assert "<img" not in unsafe.text
    assert 'id="preview-image-error"' in unsafe.text


async def test_the_check_itself(media: str, settings: Settings) -> None:
    facts = await check_image(f"{media}/cover.gif", allow_loopback=True)
    assert (facts.content_type, facts.size) == ("image/gif", 42)
    # A server that refuses HEAD is asked with a ranged GET.
    fallback = await check_image(f"{media}/no-head.png", allow_loopback=True)
    assert fallback.content_type == "image/png"
    # Loopback is a private address unless the setting allows it.
    assert not settings.image_check_allow_loopback
    with pytest.raises(ImageRefusedError, match="private or local address"):
        await check_image(f"{media}/cover.png", allow_loopback=False)


async def test_a_slow_host_is_a_field_error_in_time_and_the_loop_keeps_running(
    media: str,
) -> None:
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.05)
            ticks += 1

    ticker = asyncio.create_task(tick())
    try:
        with pytest.raises(ImageRefusedError, match="did not answer within 1 seconds"):
            await check_image(f"{media}/slow.png", allow_loopback=True, timeout_s=1.0)
    finally:
        ticker.cancel()
    # The wait was spent awaiting, not holding the loop: the ticker ran meanwhile.
    assert ticks >= 2, ticks
