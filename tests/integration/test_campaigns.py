"""The campaign pages through the real app: create, validate, edit (version bumps), status
changes, duplicate, archive, today's counts, tenancy, the post picker, preview and "Try a
comment".
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy import select

from app.accounts.connect import disconnect_account
from app.asgi import create_app
from app.db.models import (
    Campaign,
    CampaignStatus,
    CampaignTrigger,
    DmLog,
    LegState,
    TriggerKind,
)
from app.resources import Resources
from app.settings import Settings, load_settings
from tests.support.dashboard import (
    LEMON_REEL,
    STARTER_POST,
    add_account,
    connect_account,
    csrf_token,
    error_for,
    identity_of,
    sandbox_env,
    sign_up,
    tokens,
    web_env_for,
)
from tests.support.sandbox_process import SandboxProcess, start_sandbox

OWNER = "sunny@example.com"
Client = AsyncTestClient  # type: ignore[type-arg]


@pytest.fixture
async def owner(
    settings: Settings, resources: Resources, test_env: dict[str, str]
) -> AsyncIterator[tuple[Client, int]]:
    async with AsyncTestClient(create_app(settings)) as client:
        await sign_up(client, OWNER, workspace="Sunny Bakes")
        _, workspace_id = await identity_of(resources, OWNER)
        yield client, await add_account(resources, workspace_id)


def _form(page: str, action: str, account_id: int, **changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        **tokens(page, action),
        "name": "Lemon loaf",
        "account_id": str(account_id),
        "scope": "post",
        "media_id": LEMON_REEL,
        f"media_caption_{LEMON_REEL}": "Lemon drizzle loaf 🍋 Comment RECIPE",
        "match_mode": "whole_word",
        "keywords": ["RECIPE", "recipe please"],
        "excluded_keywords": ["giveaway"],
        "dm_text": "Hi {username}! Here is the recipe: {link}",
        "button_title_1": "Get the recipe",
        "button_url_1": "https://sunny.example/lemon",
        "public_replies": "Sent you a DM!\nCheck your inbox 📩",
        "priority": "5",
        "once_per_person": "on",
    }
    base.update(changes)
    return {k: v for k, v in base.items() if v is not None}


async def _create(client: Client, account_id: int, **changes: Any) -> int:
    page = await client.get("/campaigns/new")
    response = await client.post(
        "/campaigns",
        data=_form(page.text, "/campaigns", account_id, **changes),
        follow_redirects=False,
    )
    assert response.status_code == 303, response.text
    return int(response.headers["location"].split("/")[2].split("?")[0])


async def _campaign(resources: Resources, campaign_id: int) -> Campaign:
    async with resources.sessionmaker() as session:
        campaign = await session.get(Campaign, campaign_id)
        assert campaign is not None
        return campaign


async def _post(client: Client, path: str, page_path: str, **extra: str) -> Any:
    page = await client.get(page_path)
    return await client.post(
        path, data={**tokens(page.text, path), **extra}, follow_redirects=False
    )


async def test_a_campaign_is_created_as_a_draft_with_what_was_typed(
    owner: tuple[Client, int], resources: Resources
) -> None:
    client, account_id = owner
    campaign_id = await _create(client, account_id, activate=None)
    campaign = await _campaign(resources, campaign_id)
    assert campaign.status is CampaignStatus.DRAFT
    assert campaign.version == 1
    assert campaign.media_id == LEMON_REEL
    assert campaign.media_caption == "Lemon drizzle loaf 🍋 Comment RECIPE"
    assert campaign.keywords == ["RECIPE", "recipe please"]
    assert campaign.excluded_keywords == ["giveaway"]
    assert campaign.buttons == [{"title": "Get the recipe", "url": "https://sunny.example/lemon"}]
    assert campaign.public_replies == ["Sent you a DM!", "Check your inbox 📩"]
    assert campaign.public_reply_enabled
    assert campaign.priority == 5
    assert campaign.activated_at is None
    assert not campaign.utm_enabled

    listing = await client.get("/campaigns")
    assert "Lemon loaf" in listing.text
    assert 'data-status="draft"' in listing.text


async def test_utm_tags_are_a_switch_on_the_links(
    owner: tuple[Client, int], resources: Resources
) -> None:
    client, account_id = owner
    campaign_id = await _create(client, account_id, utm_enabled="on")
    assert (await _campaign(resources, campaign_id)).utm_enabled
    editor = await client.get(f"/campaigns/{campaign_id}")
    assert re.search(r'name="utm_enabled" id="utm_enabled"\s+checked', editor.text)


async def test_save_and_activate_makes_it_live_at_once(
    owner: tuple[Client, int], resources: Resources
) -> None:
    client, account_id = owner
    campaign_id = await _create(client, account_id, activate="1")
    campaign = await _campaign(resources, campaign_id)
    assert campaign.status is CampaignStatus.ACTIVE
    assert campaign.activated_at is not None


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"name": ""}, "name", "Give the campaign a name"),
        (
            {"dm_text": "🍋" * 251, "button_title_1": "", "button_url_1": ""},
            "dm_text",
            "1004 of 1000 bytes",
        ),
        (
            {"dm_text": "é" * 640 + "{username}", "button_title_1": "Go"},
            "dm_text",
            "670 of 640 characters",
        ),
        ({"dm_text": "Hi {name}"}, "dm_text", "Unknown placeholder {name}"),
        (
            {"button_title_1": "", "button_url_1": "", "dm_text": "see {link}"},
            "dm_text",
            "{link} needs a link",
        ),
        ({"button_title_1": "Get the full recipe now"}, "button_1", "at most 20 characters"),
        ({"button_url_1": "http://sunny.example"}, "button_1", "https://"),
        ({"button_title_2": "Second"}, "button_2", "Add the link"),
        ({"keywords": [f"k{i}" for i in range(11)]}, "keywords", "At most 10 keywords"),
        ({"keywords": ["x" * 51]}, "keywords", "longer than 50 characters"),
        ({"keywords": ["?!"]}, "keywords", "no letters, digits or emoji"),
        ({"priority": "2000"}, "priority", "between −1000 and 1000"),
        ({"public_replies": "\n".join(f"r{i}" for i in range(11))}, "public_replies", "At most 10"),
        ({"scope": "somewhere"}, "scope", "Choose which posts"),
    ],
)
async def test_invalid_campaigns_show_errors_next_to_the_fields(
    owner: tuple[Client, int],
    resources: Resources,
    changes: dict[str, Any],
    field: str,
    message: str,
) -> None:
    client, account_id = owner
    page = await client.get("/campaigns/new")
    form = _form(page.text, "/campaigns", account_id, **changes)
    response = await client.post("/campaigns", data=form)
    assert response.status_code == 422
    error = error_for(response.text, field)
    assert error is not None
    assert message in error
    # What was typed is kept in the form.
    if changes.get("name", "x"):
        assert "Lemon loaf" in response.text or changes.get("name")
    async with resources.sessionmaker() as session:
        assert (await session.execute(select(Campaign))).first() is None

    # The same answer for htmx is the form alone, swapped in place.
    partial = await client.post("/campaigns", data=form, headers={"hx-request": "true"})
    assert partial.status_code == 422
    assert partial.text.lstrip().startswith("<form")
    assert message in (error_for(partial.text, field) or "")


async def test_activation_needs_a_complete_campaign(
    owner: tuple[Client, int], resources: Resources
) -> None:
    client, account_id = owner
    campaign_id = await _create(client, account_id, media_id="", keywords=[], dm_text="")
    response = await _post(
        client, f"/campaigns/{campaign_id}/activate", f"/campaigns/{campaign_id}"
    )
    assert response.headers["location"] == f"/campaigns/{campaign_id}?check=1"
    page = await client.get(response.headers["location"])
    assert "Pick the post" in (error_for(page.text, "media_id") or "")
    assert "Add at least one keyword" in (error_for(page.text, "keywords") or "")
    assert "Write the DM" in (error_for(page.text, "dm_text") or "")
    assert (await _campaign(resources, campaign_id)).status is CampaignStatus.DRAFT

    # "Any comment" needs no keyword; any post needs no post.
    page = await client.get(f"/campaigns/{campaign_id}")
    saved = await client.post(
        f"/campaigns/{campaign_id}",
        data=_form(
            page.text,
            f"/campaigns/{campaign_id}",
            account_id,
            scope="any_post",
            keywords=[],
            match_mode="any_comment",
            version="1",
        ),
        follow_redirects=False,
    )
    assert saved.status_code == 303
    activated = await _post(
        client, f"/campaigns/{campaign_id}/activate", f"/campaigns/{campaign_id}"
    )
    assert activated.headers["location"] == f"/campaigns/{campaign_id}"
    campaign = await _campaign(resources, campaign_id)
    assert campaign.status is CampaignStatus.ACTIVE
    assert campaign.activated_at is not None


async def test_every_save_bumps_the_version_once_and_stale_forms_are_refused(
    owner: tuple[Client, int], resources: Resources
) -> None:
    client, account_id = owner
    campaign_id = await _create(client, account_id)
    path = f"/campaigns/{campaign_id}"
    page = await client.get(path)
    form = _form(page.text, path, account_id, name="Lemon loaf v2", version="1")
    first = await client.post(path, data=form, follow_redirects=False)
    assert first.headers["location"] == f"{path}?notice=saved"
    again = await client.post(path, data=form, follow_redirects=False)  # the same form: a repeat
    assert again.headers["location"] == first.headers["location"]
    campaign = await _campaign(resources, campaign_id)
    assert (campaign.version, campaign.name) == (2, "Lemon loaf v2")

    # Another tab still showing version 1 does not overwrite version 2.
    stale = await client.post(
        path, data=_form(page.text, path, account_id, name="Old tab", version="1", _idem="s" * 32)
    )
    assert stale.status_code == 409
    assert "Someone saved this campaign after you opened it" in stale.text
    assert (await _campaign(resources, campaign_id)).name == "Lemon loaf v2"

    # A form shown again (with a field to fix, or with the posts listed for a browser without
    # JavaScript) still names the version it was opened at, so its save is refused too.
    for extra in ({"name": ""}, {"show_posts": "1"}):
        shown = await client.post(
            path, data=_form(page.text, path, account_id, version="1", _idem="t" * 32) | extra
        )
        assert shown.status_code in (200, 422), extra
        assert '<input type="hidden" name="version" value="1">' in shown.text, extra
        resaved = await client.post(
            path, data=_form(shown.text, path, account_id, name="Old tab again", version="1")
        )
        assert resaved.status_code == 409, extra
    assert (await _campaign(resources, campaign_id)).name == "Lemon loaf v2"


async def test_a_live_campaign_must_stay_complete(
    owner: tuple[Client, int], resources: Resources
) -> None:
    client, account_id = owner
    campaign_id = await _create(client, account_id, activate="1")
    path = f"/campaigns/{campaign_id}"
    page = await client.get(path)
    response = await client.post(
        path, data=_form(page.text, path, account_id, dm_text="", version="1")
    )
    assert response.status_code == 422
    assert "pause it to save a draft" in response.text
    assert (await _campaign(resources, campaign_id)).version == 1


async def test_pause_resume_duplicate_and_archive(
    owner: tuple[Client, int], resources: Resources
) -> None:
    client, account_id = owner
    campaign_id = await _create(client, account_id, activate="1")
    first_activation = (await _campaign(resources, campaign_id)).activated_at
    path = f"/campaigns/{campaign_id}"

    paused = await _post(client, f"{path}/pause", "/campaigns", back="list")
    assert paused.headers["location"] == "/campaigns"
    assert (await _campaign(resources, campaign_id)).status is CampaignStatus.PAUSED
    resumed = await _post(client, f"{path}/activate", "/campaigns", back="list")
    assert resumed.headers["location"] == "/campaigns"
    campaign = await _campaign(resources, campaign_id)
    assert campaign.status is CampaignStatus.ACTIVE
    assert campaign.activated_at is not None
    assert first_activation is not None
    assert campaign.activated_at > first_activation
    assert campaign.version == 1  # status changes are not edits

    copied = await _post(client, f"{path}/duplicate", path)
    copy_id = int(copied.headers["location"].split("/")[2].split("?")[0])
    copy = await _campaign(resources, copy_id)
    assert copy.name == "Lemon loaf copy"
    assert copy.status is CampaignStatus.DRAFT
    assert (copy.media_id, copy.keywords, copy.dm_text, copy.buttons) == (
        campaign.media_id,
        campaign.keywords,
        campaign.dm_text,
        campaign.buttons,
    )
    assert copy.version == 1
    page = await client.get(copied.headers["location"])
    assert "This is a copy" in page.text

    archived = await _post(client, f"{path}/archive", path)
    assert archived.headers["location"] == "/campaigns"
    assert (await _campaign(resources, campaign_id)).status is CampaignStatus.ARCHIVED
    listing = await client.get("/campaigns")
    assert f'data-campaign-id="{campaign_id}"' not in listing.text
    assert f'data-campaign-id="{copy_id}"' in listing.text
    archive_page = await client.get("/campaigns?archived=true")
    assert f'data-campaign-id="{campaign_id}"' in archive_page.text
    edit = await client.post(
        path,
        data=_form(archive_page.text, "/logout", account_id, version="1") | {"_idem": "a" * 32},
    )
    assert edit.status_code == 409
    assert "archived" in edit.text


async def test_a_next_post_campaign_is_armed_and_keeps_its_binding(
    owner: tuple[Client, int], resources: Resources
) -> None:
    client, account_id = owner
    campaign_id = await _create(client, account_id, scope="next_post")
    campaign = await _campaign(resources, campaign_id)
    assert campaign.media_id is None
    assert campaign.armed_at is not None
    armed_at = campaign.armed_at
    # The worker binds it to the post published next.
    async with resources.sessionmaker() as session, session.begin():
        bound = await session.get(Campaign, campaign_id)
        assert bound is not None
        bound.media_id = STARTER_POST
    path = f"/campaigns/{campaign_id}"
    page = await client.get(path)
    await client.post(
        path,
        data=_form(page.text, path, account_id, scope="next_post", name="Renamed", version="1"),
        follow_redirects=False,
    )
    campaign = await _campaign(resources, campaign_id)
    assert (campaign.name, campaign.media_id, campaign.armed_at) == (
        "Renamed",
        STARTER_POST,
        armed_at,
    )
    # Duplicating waits for a post of its own.
    copied = await _post(client, f"{path}/duplicate", path)
    copy = await _campaign(resources, int(copied.headers["location"].split("/")[2].split("?")[0]))
    assert copy.media_id is None
    assert copy.armed_at is not None


async def test_activating_an_unbound_next_post_draft_rearms_it_from_now(
    owner: tuple[Client, int], resources: Resources
) -> None:
    """A draft armed days ago must wait for a post published after it goes live."""
    client, account_id = owner
    campaign_id = await _create(client, account_id, scope="next_post")
    async with resources.sessionmaker() as session, session.begin():
        draft = await session.get(Campaign, campaign_id)
        assert draft is not None
        draft.armed_at = datetime.now(UTC) - timedelta(days=3)
    path = f"/campaigns/{campaign_id}"
    activated = await _post(client, f"{path}/activate", path)
    assert activated.headers["location"] == path
    campaign = await _campaign(resources, campaign_id)
    assert campaign.status is CampaignStatus.ACTIVE
    assert campaign.armed_at is not None
    assert campaign.activated_at is not None
    assert campaign.armed_at >= campaign.activated_at - timedelta(seconds=1)

    # A paused campaign that was already bound keeps its post when it resumes.
    async with resources.sessionmaker() as session, session.begin():
        bound = await session.get(Campaign, campaign_id)
        assert bound is not None
        bound.media_id = STARTER_POST
        bound.status = CampaignStatus.PAUSED
        armed_at = bound.armed_at
    await _post(client, f"{path}/activate", path)
    campaign = await _campaign(resources, campaign_id)
    assert (campaign.status, campaign.media_id, campaign.armed_at) == (
        CampaignStatus.ACTIVE,
        STARTER_POST,
        armed_at,
    )


async def test_the_list_shows_todays_counts_and_what_waits(
    owner: tuple[Client, int], resources: Resources
) -> None:
    client, account_id = owner
    campaign_id = await _create(client, account_id, activate="1")
    campaign = await _campaign(resources, campaign_id)
    states = [
        LegState.SENT,
        LegState.SENT,
        LegState.FAILED,
        LegState.UNCONFIRMED,
        LegState.UNCONFIRMED,
        LegState.SKIPPED_DEDUP,
        LegState.PENDING,
    ]
    async with resources.sessionmaker() as session, session.begin():
        for number, state in enumerate(states):
            session.add(
                DmLog(
                    workspace_id=campaign.workspace_id,
                    account_id=account_id,
                    campaign_id=campaign_id,
                    trigger_kind=TriggerKind.COMMENT,
                    trigger_id=f"c{number}",
                    pr_state=state,
                )
            )
        session.add(  # yesterday's does not count
            DmLog(
                workspace_id=campaign.workspace_id,
                account_id=account_id,
                campaign_id=campaign_id,
                trigger_kind=TriggerKind.COMMENT,
                trigger_id="old",
                pr_state=LegState.SENT,
                created_at=datetime.now(UTC) - timedelta(days=1, hours=1),
            )
        )
        session.add(  # yesterday's comment still waiting for its DM: waiting counts it
            DmLog(
                workspace_id=campaign.workspace_id,
                account_id=account_id,
                campaign_id=campaign_id,
                trigger_kind=TriggerKind.COMMENT,
                trigger_id="old-waiting",
                pr_state=LegState.PENDING,
                created_at=datetime.now(UTC) - timedelta(days=1, hours=1),
            )
        )
    listing = await client.get("/campaigns")
    assert "2 sent" in listing.text
    assert "1 not sent" in listing.text
    assert "1 skipped" in listing.text
    # Unconfirmed sends need the creator's look: counted, and linked to just those rows.
    today = datetime.now(UTC).date().isoformat()
    assert (
        f'href="/log?state=UNCONFIRMED&amp;campaign={campaign_id}&amp;from={today}"' in listing.text
    )
    assert "2 maybe sent" in listing.text
    # Comments waiting for their DM, today's and older, linked to just those rows.
    waiting = re.search(r'<a class="count-waiting" href="([^"]+)"[^>]*>([^<]+)</a>', listing.text)
    assert waiting is not None
    assert waiting.groups() == (f"/log?state=PENDING&amp;campaign={campaign_id}", "2 waiting")
    log = await client.get(f"/log?state=PENDING&campaign={campaign_id}")
    assert log.status_code == 200
    assert log.text.count('class="log-row"') == 2


async def test_another_workspace_gets_404_for_campaigns_it_does_not_own(
    owner: tuple[Client, int], resources: Resources, settings: Settings
) -> None:
    client, account_id = owner
    campaign_id = await _create(client, account_id)
    path = f"/campaigns/{campaign_id}"
    async with AsyncTestClient(create_app(settings)) as rival:
        await sign_up(rival, "rival@example.com")
        _, rival_ws = await identity_of(resources, "rival@example.com")
        rival_account = await add_account(
            resources, rival_ws, ig_user_id="17841462908174420", username="north.trails"
        )
        page = await rival.get("/campaigns/new")
        assert (await rival.get(path, headers={"accept": "text/html"})).status_code == 404
        token = csrf_token(page.text)
        for action in ("", "/pause", "/activate", "/archive", "/duplicate"):
            response = await rival.post(
                f"{path}{action}",
                data=_form(page.text, "/campaigns", account_id, version="1")
                | {"_idem": f"{action.strip('/') or 'save'}-key-0123456789", "_csrf_token": token},
                headers={"accept": "text/html"},
            )
            assert response.status_code == 404, action
        # Nor can it attach a campaign to the other workspace's account.
        stolen = await rival.post("/campaigns", data=_form(page.text, "/campaigns", account_id))
        assert stolen.status_code == 422
        assert "this workspace" in (error_for(stolen.text, "account_id") or "")
        assert rival_account != account_id
    campaign = await _campaign(resources, campaign_id)
    assert (campaign.version, campaign.status) == (1, CampaignStatus.DRAFT)
    async with resources.sessionmaker() as session:
        assert len((await session.execute(select(Campaign))).all()) == 1


async def test_preview_renders_the_dm_as_instagram_would(owner: tuple[Client, int]) -> None:
    client, _ = owner
    page = await client.get("/campaigns/new")
    headers = {"x-csrftoken": csrf_token(page.text), "hx-request": "true"}
    with_buttons = await client.post(
        "/campaigns/preview",
        data={
            "dm_text": "Hi {username}! Recipe: {link}",
            "button_title_1": "Get it",
            "button_url_1": "https://sunny.example/r",
        },
        headers=headers,
    )
    assert with_buttons.status_code == 200
    assert "Hi jane.doe! Recipe:" in with_buttons.text
    assert 'href="https://sunny.example/r"' in with_buttons.text  # as the button's link
    assert "Get it" in with_buttons.text
    assert "/ 640 characters" in with_buttons.text

    # A link the campaign could not be saved with is shown as a title, never as a link.
    for url in ("javascript:alert(1)", "http://sunny.example/r", "data:text/html,hi", "/r"):
        unsafe = await client.post(
            "/campaigns/preview",
            data={"dm_text": "Hi", "button_title_1": "Get it", "button_url_1": url},
            headers=headers,
        )
        assert unsafe.status_code == 200
        assert "Get it" in unsafe.text
        assert "href=" not in unsafe.text, url

    plain = await client.post(
        "/campaigns/preview", data={"dm_text": "Olá {username} 🍋"}, headers=headers
    )
    assert "Olá jane.doe 🍋" in plain.text
    assert f"{len('Olá jane.doe 🍋'.encode())} / 1000 bytes" in plain.text

    too_long = await client.post(
        "/campaigns/preview", data={"dm_text": "🍋" * 260}, headers=headers
    )
    assert "Too long for Instagram" in too_long.text


async def test_keyword_chips(owner: tuple[Client, int]) -> None:
    client, _ = owner
    page = await client.get("/campaigns/new")
    headers = {"x-csrftoken": csrf_token(page.text), "hx-request": "true"}
    added = await client.post(
        "/campaigns/keywords",
        data={
            "field": "keywords",
            "keywords": ["RECIPE"],
            "keywords_entry": "guide,  Recipe , link",
        },
        headers=headers,
    )
    assert added.text.count('name="keywords" value=') == 3
    assert 'data-chip="guide"' in added.text
    removed = await client.post(
        "/campaigns/keywords",
        data={"field": "keywords", "keywords": ["RECIPE", "guide"], "remove": "GUIDE"},
        headers=headers,
    )
    assert removed.text.count('name="keywords" value=') == 1
    too_many = await client.post(
        "/campaigns/keywords",
        data={"field": "excluded_keywords", "excluded_keywords": [f"w{i}" for i in range(11)]},
        headers=headers,
    )
    assert "At most 10 excluded keywords" in too_many.text


# --- with the sandbox: the post picker and "Try a comment" -------------------------------


@pytest.fixture(scope="module")
def sandbox(test_env: dict[str, str]) -> Iterator[SandboxProcess]:
    with start_sandbox(sandbox_env(test_env)) as process:
        yield process


@pytest.fixture
async def connected(
    test_env: dict[str, str], sandbox: SandboxProcess, resources: Resources
) -> AsyncIterator[tuple[Client, int]]:
    sandbox.admin.reset()
    wired = load_settings(web_env_for(test_env, sandbox.base_url))
    async with AsyncTestClient(create_app(wired)) as client:
        await sign_up(client, OWNER)
        response = await connect_account(client)
        yield client, int(response.headers["location"].rsplit("=", 1)[1])


async def test_the_post_picker_lists_the_accounts_media_with_live_thumbnails(
    connected: tuple[Client, int], resources: Resources
) -> None:
    client, account_id = connected
    picker = await client.get(f"/campaigns/media?account_id={account_id}")
    assert picker.status_code == 200
    assert picker.text.count('name="media_id"') == 6
    assert "Lemon drizzle loaf" in picker.text
    assert 'src="https://scontent.cdninstagram.com/' in picker.text
    assert "Reel" in picker.text

    # A saved campaign keeps the caption, never an image URL.
    page = await client.get("/campaigns/new")
    response = await client.post(
        "/campaigns",
        data=_form(page.text, "/campaigns", account_id)
        | {
            f"media_caption_{LEMON_REEL}": "Lemon drizzle loaf, the one you keep asking about",
        },
        follow_redirects=False,
    )
    campaign = await _campaign(
        resources, int(response.headers["location"].split("/")[2].split("?")[0])
    )
    assert campaign.media_caption == "Lemon drizzle loaf, the one you keep asking about"
    stored = repr({c.name: getattr(campaign, c.name) for c in Campaign.__table__.columns})
    assert "scontent" not in stored

    # A selected post not on this page still shows, as the current one.
    kept = await client.get(
        f"/campaigns/media?account_id={account_id}&media_id=999&media_caption=Old+post&media_account={account_id}"
    )
    assert "Old post" in kept.text
    assert 'value="999" checked' in kept.text


async def test_without_javascript_the_form_asks_for_the_posts_and_saves_nothing(
    connected: tuple[Client, int], resources: Resources
) -> None:
    client, account_id = connected
    page = await client.get("/campaigns/new")
    typed = _form(page.text, "/campaigns", account_id, name="Typed, not saved", media_id=None)
    listed = await client.post("/campaigns", data=typed | {"show_posts": "1"})
    assert listed.status_code == 200
    assert listed.text.count('name="media_id"') == 6
    assert "Lemon drizzle loaf" in listed.text
    assert 'value="Typed, not saved"' in listed.text
    assert "Nothing was saved" not in listed.text  # not an error: nothing was asked to save
    async with resources.sessionmaker() as session:
        assert (await session.execute(select(Campaign.id))).all() == []

    # The form's one-time key was not spent on the list: the same form still saves.
    picked = typed | {"media_id": LEMON_REEL}
    saved = await client.post("/campaigns", data=picked, follow_redirects=False)
    assert saved.status_code == 303
    campaign_id = int(saved.headers["location"].split("/")[2].split("?")[0])
    assert (await _campaign(resources, campaign_id)).media_id == LEMON_REEL

    # On a saved campaign too: the edit is shown, not saved.
    path = f"/campaigns/{campaign_id}"
    edit = await client.get(path, headers={"accept": "text/html"})
    changed = _form(edit.text, path, account_id, name="Renamed, not saved", version="1")
    listed = await client.post(path, data=changed | {"show_posts": "1"})
    assert listed.status_code == 200
    assert 'value="Renamed, not saved"' in listed.text
    assert f'value="{LEMON_REEL}" checked' in listed.text
    assert (await _campaign(resources, campaign_id)).name == "Typed, not saved"

    # A cursor that is not one, or an account that is not the workspace's: a sentence.
    for extra in ({"media_after": "x" * 5000}, {"media_after": "not-a-cursor"}):
        odd = await client.post("/campaigns", data=typed | extra)
        assert odd.status_code == 200, extra
        assert 'id="media-picker"' in odd.text
    stranger = await client.post(
        "/campaigns", data=typed | {"account_id": "987654321", "show_posts": "1"}
    )
    assert stranger.status_code == 200
    assert "Choose an account to see its posts." in stranger.text


async def test_try_a_comment_explains_the_winner_and_the_misses(
    connected: tuple[Client, int], resources: Resources
) -> None:
    client, account_id = connected
    specific = await _create(client, account_id, name="On the lemon reel", activate="1")
    anywhere = await _create(
        client, account_id, name="Everywhere", scope="any_post", priority="10", activate="1"
    )
    await _create(client, account_id, name="Just a draft", scope="any_post")
    page = await client.get("/campaigns/try")
    headers = {"x-csrftoken": csrf_token(page.text), "hx-request": "true"}

    async def try_comment(text: str, media_id: str) -> str:
        response = await client.post(
            "/campaigns/try",
            data={"account_id": str(account_id), "media_id": media_id, "comment": text},
            headers=headers,
        )
        assert response.status_code == 200
        return response.text

    on_reel = await try_comment("RECIPE please!!", LEMON_REEL)
    assert "“On the lemon reel” would send the DM" in on_reel
    assert "It wins over Everywhere" in on_reel
    assert 'data-verdict="lost"' in on_reel
    assert 'data-verdict="inactive"' in on_reel

    elsewhere = await try_comment("recipe", STARTER_POST)
    assert "“Everywhere” would send the DM" in elsewhere

    nothing = await try_comment("so pretty", LEMON_REEL)
    assert 'data-matched="no"' in nothing
    assert "No active campaign on this post has a keyword" in nothing
    assert "inside a longer word" not in nothing
    # "recipes?" is no whole-word RECIPE: the answer says that is why.
    plural = await try_comment("recipes?", LEMON_REEL)
    assert 'data-matched="no"' in plural
    assert "appears only inside a longer word" in plural
    assert "matches whole words only" in plural

    excluded = await try_comment("RECIPE giveaway", LEMON_REEL)
    assert "excludes a word" in excluded
    assert {specific, anywhere}

    # Without JavaScript the form posts as a page: the whole page comes back, the comment
    # still in its field and the answer under it.
    page_answer = await client.post(
        "/campaigns/try",
        data={
            "_csrf_token": csrf_token(page.text),
            "account_id": str(account_id),
            "media_id": LEMON_REEL,
            "comment": "RECIPE please!!",
        },
        headers={"accept": "text/html"},
    )
    assert page_answer.status_code == 200
    assert page_answer.text.lstrip().lower().startswith("<!doctype html>")
    assert 'value="RECIPE please!!"' in page_answer.text
    assert "“On the lemon reel” would send the DM" in page_answer.text
    assert "<!doctype" not in on_reel.lower()  # htmx still gets only the result


async def test_emoji_keywords_and_number_codes_save_and_try(
    connected: tuple[Client, int], resources: Resources
) -> None:
    client, account_id = connected
    fire = await _create(
        client,
        account_id,
        name="Fire",
        keywords=["🔥", "👍🏽"],
        excluded_keywords=["👎"],
        activate="1",
    )
    assert (await _campaign(resources, fire)).keywords == ["🔥", "👍🏽"]
    await _create(
        client, account_id, name="Code", keywords=["2024"], excluded_keywords=[], activate="1"
    )
    page = await client.get("/campaigns/try")
    headers = {"x-csrftoken": csrf_token(page.text), "hx-request": "true"}

    async def try_comment(text: str) -> str:
        response = await client.post(
            "/campaigns/try",
            data={"account_id": str(account_id), "media_id": LEMON_REEL, "comment": text},
            headers=headers,
        )
        assert response.status_code == 200
        return response.text

    assert "“Fire” would send the DM" in await try_comment("🔥🔥")
    assert "“Fire” would send the DM" in await try_comment("yes 👍🏿")
    assert "excludes a word" in await try_comment("🔥 👎")
    joined = await try_comment("❤️‍🔥")
    assert 'data-matched="no"' in joined
    assert "🔥 appears only joined into ❤️‍🔥, which counts as an emoji of its own" in joined
    code = await try_comment("code 2O24 please")
    assert "“Code” would send the DM" in code
    assert "“2O24” in the comment was read as 2024" in code
    longer = await try_comment("code 2O245")
    assert 'data-matched="no"' in longer


async def test_a_campaign_on_a_disconnected_account_cannot_go_live(
    owner: tuple[Client, int], resources: Resources
) -> None:
    client, account_id = owner
    campaign_id = await _create(client, account_id)
    _, workspace_id = await identity_of(resources, OWNER)
    async with resources.sessionmaker() as session, session.begin():
        assert await disconnect_account(session, workspace_id, account_id)
    response = await _post(
        client, f"/campaigns/{campaign_id}/activate", f"/campaigns/{campaign_id}"
    )
    assert response.headers["location"] == "/accounts?reconnect=1"
    page = await client.get(response.headers["location"])
    assert "Connect it again, then activate the campaign" in page.text
    assert (await _campaign(resources, campaign_id)).status is CampaignStatus.DRAFT


async def test_a_story_reply_campaign_picks_a_live_story_and_shows_in_the_list(
    connected: tuple[Client, int], resources: Resources, sandbox: SandboxProcess
) -> None:
    client, account_id = connected
    story = sandbox.admin.publish_story("sunny.bakes", "Reply LOAF for the recipe")
    picker = await client.get(f"/campaigns/stories?account_id={account_id}")
    assert picker.status_code == 200
    assert picker.text.count('name="story_id"') == 1
    assert "Reply LOAF for the recipe" in picker.text
    assert f'name="story_time_{story["id"]}" value="{story["timestamp"]}"' in picker.text

    page = await client.get("/campaigns/new")
    assert 'name="trigger" value="story_replies"' in page.text
    response = await client.post(
        "/campaigns",
        data=_form(
            page.text,
            "/campaigns",
            account_id,
            trigger="story_replies",
            story_scope="one_story",
            story_id=story["id"],
            **{f"story_time_{story['id']}": story["timestamp"]},
            keywords=["LOAF"],
            excluded_keywords=None,
            activate="1",
        ),
        follow_redirects=False,
    )
    assert response.status_code == 303, response.text
    campaign = await _campaign(
        resources, int(response.headers["location"].split("/")[2].split("?")[0])
    )
    assert campaign.status is CampaignStatus.ACTIVE
    assert campaign.trigger is CampaignTrigger.STORY_REPLIES
    assert campaign.story_id == story["id"]
    assert campaign.story_expires_at is not None
    assert campaign.media_id is None
    assert campaign.public_replies == []

    editor = await client.get(f"/campaigns/{campaign.id}")
    assert re.search(r'name="trigger" value="story_replies"\s+checked', editor.text)
    assert re.search(r'name="story_scope" value="one_story"\s+checked', editor.text)
    listing = await client.get("/campaigns")
    assert "Replies to one story" in listing.text

    assert "data-story-ended" not in listing.text

    # Once the story has ended, the picker keeps it chosen and says so, and so does the list.
    async with resources.sessionmaker() as session, session.begin():
        ended_campaign = await session.get(Campaign, campaign.id)
        assert ended_campaign is not None
        ended_campaign.story_expires_at = datetime.now(UTC) - timedelta(seconds=1)
    assert "data-story-ended" in (await client.get("/campaigns")).text
    sandbox.admin.advance_clock(24 * 3600 + 1)
    ended = await client.get(
        f"/campaigns/stories?account_id={account_id}&story_id={story['id']}"
        f"&story_account={account_id}"
    )
    assert f'value="{story["id"]}" checked' in ended.text
    assert "no longer live" in ended.text


async def test_a_story_mention_campaign_needs_no_keywords(
    owner: tuple[Client, int], resources: Resources
) -> None:
    client, account_id = owner
    campaign_id = await _create(
        client,
        account_id,
        trigger="story_mentions",
        keywords=None,
        excluded_keywords=None,
        scope=None,
        media_id=None,
        once_per_person=None,
        activate="1",
    )
    campaign = await _campaign(resources, campaign_id)
    assert campaign.status is CampaignStatus.ACTIVE
    assert campaign.trigger is CampaignTrigger.STORY_MENTIONS
    assert campaign.keywords == []
    assert campaign.once_per_person
    listing = await client.get("/campaigns")
    assert "Mentions in stories" in listing.text
    assert "every mention" in listing.text
    assert "any comment" not in listing.text


async def test_the_switch_to_skip_the_public_reply_in_a_backlog_saves_and_shows(
    owner: tuple[Client, int], resources: Resources
) -> None:
    client, account_id = owner
    campaign_id = await _create(client, account_id, public_reply_skip_in_backlog="on")
    assert (await _campaign(resources, campaign_id)).public_reply_skip_in_backlog
    path = f"/campaigns/{campaign_id}"
    page = await client.get(path)
    assert re.search(r'id="public_reply_skip_in_backlog"\s+checked', page.text)
    # Unchecked, a browser sends nothing for it: the switch goes off.
    off = await client.post(
        path, data=_form(page.text, path, account_id, version="1"), follow_redirects=False
    )
    assert off.status_code == 303, off.text
    assert not (await _campaign(resources, campaign_id)).public_reply_skip_in_backlog
    page = await client.get(path)
    assert not re.search(r'id="public_reply_skip_in_backlog"\s+checked', page.text)
