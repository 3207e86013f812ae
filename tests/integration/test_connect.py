"""Connect Instagram against the real sandbox: OAuth with state and PKCE, the long-lived token,
`/me.user_id`, the webhook subscription, and every way the callback can go wrong.

The consent page is driven over HTTP like a person would (pick the account, Allow/Cancel);
the app runs in-process with its Graph and OAuth bases pointing at the sandbox.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy import select

from app.accounts.connect import WEBHOOK_FIELDS, claim_state
from app.accounts.tokens import open_access_token
from app.asgi import create_app
from app.db.models import AccountStatus, Campaign, CampaignStatus, InstagramAccount
from app.resources import Resources
from app.settings import Settings, load_settings
from tests.support.dashboard import (
    SUNNY,
    SUNNY_APP_SCOPED,
    add_account,
    connect_account,
    consent,
    identity_of,
    sandbox_env,
    sign_up,
    start_connect,
    tokens,
    web_env_for,
)
from tests.support.sandbox_process import SandboxProcess, start_sandbox

OWNER = "sunny@example.com"
RIVAL = "copycat@example.com"


@pytest.fixture(scope="module")
def sandbox(test_env: dict[str, str]) -> Iterator[SandboxProcess]:
    with start_sandbox(sandbox_env(test_env)) as process:
        yield process


@pytest.fixture
def wired(test_env: dict[str, str], sandbox: SandboxProcess) -> Settings:
    sandbox.admin.reset()
    return load_settings(web_env_for(test_env, sandbox.base_url))


@pytest.fixture
async def client(wired: Settings) -> AsyncIterator[AsyncTestClient]:  # type: ignore[type-arg]
    async with AsyncTestClient(create_app(wired)) as test_client:
        await sign_up(test_client, OWNER, workspace="Sunny Bakes")
        yield test_client


async def _accounts(resources: Resources) -> list[InstagramAccount]:
    async with resources.sessionmaker() as session:
        return list((await session.execute(select(InstagramAccount))).scalars())


async def test_connecting_stores_the_professional_account_with_a_long_lived_token(
    client: AsyncTestClient,  # type: ignore[type-arg]
    resources: Resources,
    sandbox: SandboxProcess,
    wired: Settings,
) -> None:
    authorize_url = await start_connect(client)
    query = parse_qs(urlsplit(authorize_url).query)
    assert authorize_url.startswith(f"{sandbox.base_url}/oauth/authorize?")
    assert query["client_id"] == [wired.instagram_app_id]
    assert query["response_type"] == ["code"]
    assert query["redirect_uri"] == [f"{wired.public_base_url}/accounts/instagram/callback"]
    assert "instagram_business_basic" in query["scope"][0]
    assert len(query["state"][0]) >= 32
    assert query["code_challenge_method"] == ["S256"]
    assert len(query["code_challenge"][0]) == 43  # base64url(SHA-256) of the verifier

    response = await client.get(await consent(authorize_url), follow_redirects=False)
    assert response.status_code == 303
    assert response.headers["location"].startswith("/accounts?connected=")

    [account] = await _accounts(resources)
    assert account.ig_user_id == SUNNY  # /me.user_id, not the app-scoped id
    assert account.app_scoped_id == SUNNY_APP_SCOPED
    assert account.username == "sunny.bakes"
    assert account.status is AccountStatus.ACTIVE
    assert account.token_expires_at is not None
    left = account.token_expires_at - datetime.now(UTC)
    assert timedelta(days=59) < left <= timedelta(days=60)
    assert account.webhook_subscribed_at is not None
    assert account.webhook_fields == list(WEBHOOK_FIELDS)
    token = open_access_token(resources.cipher, account)
    assert token.encode() not in (account.token_ciphertext or b"")

    # The stored token is the long-lived one and works against the Graph API.
    async with httpx.AsyncClient() as http:
        me = await http.get(
            f"{sandbox.graph_base}/me",
            params={"fields": "user_id"},
            headers={"Authorization": f"Bearer {token}"},
        )
    assert me.json()["user_id"] == SUNNY
    world = sandbox.admin.world()
    sunny = next(a for a in world["accounts"] if a["user_id"] == SUNNY)
    assert sorted(sunny["subscribed_fields"]) == sorted(WEBHOOK_FIELDS)

    page = await client.get("/accounts?connected=1")
    assert 'data-username="sunny.bakes"' in page.text
    assert "expires in 59 days" in page.text or "expires in 60 days" in page.text
    assert "subscribed" in page.text
    # Meta's field names stay in the title; the card says them in words.
    assert "Instagram tells us about comments, DMs, button taps, read receipts" in page.text


async def test_the_documented_data_wrappers_are_understood(
    client: AsyncTestClient,
    resources: Resources,
    sandbox: SandboxProcess,  # type: ignore[type-arg]
) -> None:
    sandbox.admin.update_settings(token_response_shape="data", me_response_shape="data")
    response = await connect_account(client)
    assert response.headers["location"].startswith("/accounts?connected=")
    [account] = await _accounts(resources)
    assert account.ig_user_id == SUNNY


async def test_a_denied_consent_comes_back_with_a_clear_message(
    client: AsyncTestClient,
    resources: Resources,  # type: ignore[type-arg]
) -> None:
    callback = await consent(await start_connect(client), allow=False)
    assert "error=access_denied" in callback
    response = await client.get(callback, follow_redirects=False)
    assert response.headers["location"] == "/accounts?connect=denied"
    page = await client.get(response.headers["location"])
    assert "You declined on Instagram" in page.text
    assert await _accounts(resources) == []


async def test_a_forged_state_is_refused_and_the_code_never_spent(
    client: AsyncTestClient,
    resources: Resources,  # type: ignore[type-arg]
) -> None:
    callback = await consent(await start_connect(client))
    params = parse_qs(urlsplit(callback).query)
    forged = {"code": params["code"][0], "state": "attacker-chosen-state-" + "x" * 20}
    response = await client.get(
        f"/accounts/instagram/callback?{urlencode(forged)}", follow_redirects=False
    )
    assert response.headers["location"] == "/accounts?connect=state"
    page = await client.get(response.headers["location"])
    assert "could not be verified" in page.text
    assert await _accounts(resources) == []


async def test_a_head_on_the_callback_spends_nothing(
    client: AsyncTestClient,
    resources: Resources,  # type: ignore[type-arg]
) -> None:
    callback = await consent(await start_connect(client))
    head = await client.head(callback, follow_redirects=False)
    assert head.status_code == 303
    assert head.headers["location"] == "/accounts"
    assert await _accounts(resources) == []
    # The browser's GET that follows still connects: the state and the code are unspent.
    response = await client.get(callback, follow_redirects=False)
    assert response.headers["location"].startswith("/accounts?connected=")
    assert len(await _accounts(resources)) == 1


async def test_a_replayed_callback_is_refused(
    client: AsyncTestClient,
    resources: Resources,  # type: ignore[type-arg]
) -> None:
    callback = await consent(await start_connect(client))
    first = await client.get(callback, follow_redirects=False)
    assert first.headers["location"].startswith("/accounts?connected=")
    replay = await client.get(callback, follow_redirects=False)
    assert replay.headers["location"] == "/accounts?connect=state"
    assert len(await _accounts(resources)) == 1


async def test_a_callback_this_browser_did_not_start_is_refused(
    wired: Settings,
    client: AsyncTestClient,
    resources: Resources,  # type: ignore[type-arg]
) -> None:
    callback = await consent(await start_connect(client))
    async with AsyncTestClient(create_app(wired)) as other_browser:
        await sign_up(other_browser, RIVAL)
        response = await other_browser.get(callback, follow_redirects=False)
    assert response.headers["location"] == "/accounts?connect=state"
    assert await _accounts(resources) == []


async def test_a_state_is_spent_once_even_when_replays_race(
    resources: Resources, test_env: dict[str, str]
) -> None:
    results = await asyncio.gather(*(claim_state(resources.redis, "same-state") for _ in range(10)))
    assert results.count(True) == 1


async def test_an_account_of_another_workspace_is_refused_and_left_alone(
    wired: Settings,
    client: AsyncTestClient,
    resources: Resources,  # type: ignore[type-arg]
) -> None:
    await connect_account(client)
    [before] = await _accounts(resources)
    async with AsyncTestClient(create_app(wired)) as rival:
        await sign_up(rival, RIVAL)
        response = await connect_account(rival)
        assert response.headers["location"] == "/accounts?connect=elsewhere"
        page = await rival.get(response.headers["location"])
        assert "already connected to another" in page.text
        # Nor can the rival open or change it by URL.
        detail = await rival.get(f"/accounts/{before.id}", headers={"accept": "text/html"})
        assert detail.status_code == 404
        form = tokens(page.text, "/accounts/connect")
        disconnect = await rival.post(f"/accounts/{before.id}/disconnect", data=form)
        assert disconnect.status_code == 404
    [after] = await _accounts(resources)
    assert (after.workspace_id, after.status) == (before.workspace_id, AccountStatus.ACTIVE)
    assert after.token_ciphertext == before.token_ciphertext


async def test_disconnect_wipes_the_token_pauses_campaigns_and_reconnect_restores(
    client: AsyncTestClient,
    resources: Resources,
    sandbox: SandboxProcess,  # type: ignore[type-arg]
) -> None:
    await connect_account(client)
    [account] = await _accounts(resources)
    async with resources.sessionmaker() as session, session.begin():
        campaign = Campaign(
            workspace_id=account.workspace_id,
            account_id=account.id,
            name="Recipe",
            status=CampaignStatus.ACTIVE,
            scope="any_post",
            keywords=["RECIPE"],
            dm_text="Here you go",
        )
        session.add(campaign)

    page = await client.get(f"/accounts/{account.id}")
    assert "Yes, disconnect @sunny.bakes" in page.text
    response = await client.post(
        f"/accounts/{account.id}/disconnect",
        data=tokens(page.text, f"/accounts/{account.id}/disconnect"),
        follow_redirects=False,
    )
    assert response.headers["location"] == "/accounts?disconnected=1"
    [gone] = await _accounts(resources)
    assert gone.status is AccountStatus.DISCONNECTED
    assert gone.token_ciphertext is None
    assert gone.token_key_id is None
    async with resources.sessionmaker() as session:
        status = await session.scalar(select(Campaign.status))
    assert status is CampaignStatus.PAUSED
    sunny = next(a for a in sandbox.admin.world()["accounts"] if a["user_id"] == SUNNY)
    assert sunny["subscribed_fields"] == []

    reconnected = await connect_account(client)
    assert reconnected.headers["location"] == f"/accounts?connected={account.id}"
    [back] = await _accounts(resources)
    assert back.id == account.id
    assert back.status is AccountStatus.ACTIVE
    assert back.token_ciphertext is not None
    async with resources.sessionmaker() as session:
        status = await session.scalar(select(Campaign.status))
    assert status is CampaignStatus.PAUSED  # the creator resumes campaigns deliberately


async def test_a_failed_webhook_subscription_shows_and_can_be_retried(
    client: AsyncTestClient,
    resources: Resources,
    sandbox: SandboxProcess,  # type: ignore[type-arg]
) -> None:
    sandbox.admin.add_fault("subscribed_apps", "reject", code=2, http_status=503, times=1)
    response = await connect_account(client)
    assert response.headers["location"].startswith("/accounts?connected=")
    [account] = await _accounts(resources)
    assert account.webhook_subscribed_at is None
    page = await client.get("/accounts")
    assert "not subscribed" in page.text

    retry = await client.post(
        f"/accounts/{account.id}/subscribe",
        data=tokens(page.text, f"/accounts/{account.id}/subscribe"),
        follow_redirects=False,
    )
    assert retry.status_code == 303
    [account] = await _accounts(resources)
    assert account.webhook_subscribed_at is not None


async def test_instagram_refusing_the_code_is_reported_and_nothing_stored(
    client: AsyncTestClient,
    resources: Resources,
    sandbox: SandboxProcess,  # type: ignore[type-arg]
) -> None:
    sandbox.admin.add_fault(
        "oauth_token", "reject", code=400, message="Matching code was not found", times=1
    )
    response = await connect_account(client)
    assert response.headers["location"] == "/accounts?connect=refused"
    sandbox.admin.add_fault("exchange", "reject", http_status=502, body="html", times=1)
    response = await connect_account(client)
    assert response.headers["location"] in {
        "/accounts?connect=refused",
        "/accounts?connect=unavailable",
    }
    assert await _accounts(resources) == []


async def test_reconnecting_keeps_a_policy_pause_with_time_left(
    client: AsyncTestClient,
    resources: Resources,  # type: ignore[type-arg]
) -> None:
    _, workspace_id = await identity_of(resources, OWNER)
    account_id = await add_account(resources, workspace_id)
    async with resources.sessionmaker() as session, session.begin():
        account = await session.get(InstagramAccount, account_id)
        assert account is not None
        account.status = AccountStatus.PAUSED
        account.status_reason = "Meta policy block (368)"
        account.paused_until = datetime.now(UTC) + timedelta(hours=6)
    await connect_account(client)
    [account] = await _accounts(resources)
    assert account.status is AccountStatus.PAUSED
    assert account.status_reason == "Meta policy block (368)"


async def test_a_connect_begun_on_another_loopback_name_comes_back_to_it_and_connects(
    test_env: dict[str, str], sandbox: SandboxProcess, resources: Resources
) -> None:
    sandbox.admin.reset()
    settings = load_settings(
        web_env_for(test_env, sandbox.base_url, public_base_url="http://localhost:8000")
    )
    page_origin = "http://127.0.0.1:8000"
    async with AsyncTestClient(create_app(settings), base_url=page_origin) as browser:
        await sign_up(browser, OWNER, workspace="Sunny Bakes")
        callback = await consent(await start_connect(browser))
        # Instagram sends the browser to PUBLIC_BASE_URL, where it has no session.
        answer = await browser.get(f"{settings.public_base_url}{callback}", follow_redirects=False)
        assert answer.status_code == 303
        assert answer.headers["location"] == f"{page_origin}{callback}"
        done = await browser.get(answer.headers["location"], follow_redirects=False)
        assert done.headers["location"].startswith("/accounts?connected=")
    [account] = await _accounts(resources)
    assert account.ig_user_id == SUNNY


async def test_a_callback_is_never_sent_back_to_a_host_that_is_not_this_machine(
    test_env: dict[str, str], sandbox: SandboxProcess, resources: Resources
) -> None:
    sandbox.admin.reset()
    settings = load_settings(
        web_env_for(test_env, sandbox.base_url, public_base_url="http://localhost:8000")
    )
    async with AsyncTestClient(
        create_app(settings), base_url="http://attacker.example:8000"
    ) as browser:
        await sign_up(browser, OWNER, workspace="Sunny Bakes")
        callback = await consent(await start_connect(browser))
        answer = await browser.get(
            f"{settings.public_base_url}{callback}",
            headers={"Accept": "text/html"},
            follow_redirects=False,
        )
    # Not signed in here, and not sent anywhere but this server's sign-in page.
    assert answer.status_code == 303
    assert answer.headers["location"].startswith("/login")
    assert await _accounts(resources) == []
