"""The setup doctor against the sandbox's failure modes, each with the advice it shows: a
webhook field unsubscribed behind our back (and Re-subscribe fixing it), a revoked token, a
permission refused on Instagram's screen, an app in Development mode (comments by webhook only
from people with a role, the rest found by the reconciler), and a PUBLIC_BASE_URL that points
at another server. The overview links to the doctor while a check fails."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from html import unescape

import httpx
import pytest
from litestar.testing import AsyncTestClient

from app.accounts.connect import subscribe_webhooks
from app.asgi import create_app
from app.auth.passwords import hash_password
from app.db.models import Role, User, WorkspaceMember
from app.delivery.recovery.reconcile import reconcile_account
from app.settings import Settings, load_settings
from app.setup_doctor.server import check_handshake
from app.web.idempotency import new_idempotency_key
from sandbox.client import SandboxAdmin
from tests.integration.delivery.conftest import LEMON_REEL, World
from tests.integration.delivery.polling import activated_minutes_ago, arrive_by_webhook
from tests.support.dashboard import PASSWORD, connect_account, csrf_token, sign_up
from tests.support.sandbox_process import SandboxProcess

OWNER = "owner@sunny.example"
_CHECK = re.compile(
    r'<li class="check[^"]*" data-check="(?P<key>[^"]+)" data-status="(?P<status>[^"]+)">'
    r"(?P<body>.*?)</li>",
    re.S,
)


def checks(page: str, section: str) -> dict[str, tuple[str, str]]:
    """{check key: (status, its text)} in one section of the doctor page."""
    start = page.index(f'id="{section}"')
    end = page.find("</section>", start)
    found = {}
    for match in _CHECK.finditer(page[start:end]):
        text = unescape(re.sub(r"<[^>]+>", " ", match["body"]))
        found[match["key"]] = (match["status"], " ".join(text.split()))
    return found


@pytest.fixture
def doctor_settings(delivery_env: dict[str, str], sandbox_process: SandboxProcess) -> Settings:
    # PUBLIC_BASE_URL names the sandbox: a server that is not this OnceReply.
    return load_settings({**delivery_env, "PUBLIC_BASE_URL": sandbox_process.base_url})


@pytest.fixture
async def owner(world: World, doctor_settings: Settings) -> AsyncIterator[AsyncTestClient]:  # type: ignore[type-arg]
    async with world.resources.sessionmaker() as session, session.begin():
        user = User(email=OWNER, password_hash=hash_password(PASSWORD))
        session.add(user)
        await session.flush()
        session.add(
            WorkspaceMember(workspace_id=world.workspace_id, user_id=user.id, role=Role.OWNER)
        )
    async with AsyncTestClient(create_app(doctor_settings)) as client:
        page = await client.get("/login")
        signed_in = await client.post(
            "/login",
            data={"_csrf_token": csrf_token(page.text), "email": OWNER, "password": PASSWORD},
            follow_redirects=False,
        )
        assert signed_in.status_code == 303, signed_in.text
        yield client


async def _subscribed(world: World) -> None:
    """The account as the connect flow leaves it: subscribed, permissions recorded."""
    assert await subscribe_webhooks(
        world.resources, world.account_id, "17841458120395731", world.token
    )
    await world.execute(
        "UPDATE instagram_accounts SET granted_permissions = :p WHERE id = :id",
        p=[
            "instagram_business_basic",
            "instagram_business_manage_comments",
            "instagram_business_manage_messages",
        ],
        id=world.account_id,
    )


async def _doctor(client: AsyncTestClient, world: World) -> tuple[str, dict[str, tuple[str, str]]]:  # type: ignore[type-arg]
    page = await client.get("/setup")
    assert page.status_code == 200, page.text
    return page.text, checks(page.text, f"account-{world.account_id}")


async def test_an_unsubscribed_field_is_found_and_resubscribe_turns_it_green(
    world: World,
    owner: AsyncTestClient,  # type: ignore[type-arg]
) -> None:
    await _subscribed(world)
    world.admin.set_subscription(
        "sunny.bakes", ["comments", "messaging_postbacks", "messaging_seen"]
    )

    page, found = await _doctor(owner, world)
    status, said = found["subscription"]
    assert status == "fail"
    assert "messages (DMs from fans" in said
    assert "Press Re-subscribe" in said
    assert found["token"][0] == "ok"
    assert found["permissions"][0] == "ok"
    assert f'id="resubscribe-{world.account_id}"' in page

    form = await owner.post(
        f"/setup/accounts/{world.account_id}/subscribe",
        data={"_csrf_token": csrf_token(page), "_idem": new_idempotency_key()},
        follow_redirects=False,
    )
    assert form.status_code == 303, form.text
    assert form.headers["location"] == f"/setup#account-{world.account_id}"
    page, found = await _doctor(owner, world)
    assert found["subscription"][0] == "ok"
    assert f'id="resubscribe-{world.account_id}"' not in page
    world.admin.fan_dm("jane.doe", "sunny.bakes", "hello again")
    dms = world.admin.webhook_events(field="messages")["events"]
    assert [e["status"] for e in dms] == ["no_callback"]  # sent, were a callback registered


async def test_a_revoked_token_says_reconnect(
    world: World,
    owner: AsyncTestClient,  # type: ignore[type-arg]
) -> None:
    await _subscribed(world)
    world.admin.revoke_tokens(account="sunny.bakes")
    _, found = await _doctor(owner, world)
    status, said = found["token"]
    assert status == "fail"
    assert "Instagram no longer accepts this account's token" in said
    assert "Reconnect the account" in said


async def test_a_refused_permission_is_named_with_what_it_stops(
    world: World,
    owner: AsyncTestClient,  # type: ignore[type-arg]
) -> None:
    await _subscribed(world)
    await world.execute(
        "UPDATE instagram_accounts SET granted_permissions = :p WHERE id = :id",
        p=["instagram_business_basic", "instagram_business_manage_messages"],
        id=world.account_id,
    )
    _, found = await _doctor(owner, world)
    status, said = found["permissions"]
    assert status == "fail"
    assert "instagram_business_manage_comments (to receive comments and answer them)" in said
    assert "leave every permission ticked" in said


async def test_development_mode_is_named_when_only_testers_comments_arrive_by_webhook(
    world: World,
    owner: AsyncTestClient,  # type: ignore[type-arg]
) -> None:
    await _subscribed(world)
    await activated_minutes_ago(world, world.campaign_id, 5)
    admin: SandboxAdmin = world.admin
    admin.set_app_mode("development", roles=["jane.doe"])
    tester = admin.fan_comment("jane.doe", LEMON_REEL, "RECIPE please")["id"]
    admin.fan_comment("marco_rossi", LEMON_REEL, "recipe?")
    admin.fan_comment("zoe.lefevre", LEMON_REEL, "RECIPE")
    statuses = {
        e["value"]["id"]: e["status"] for e in admin.webhook_events(field="comments")["events"]
    }
    # The sandbox has no callback: "no_callback" is what Meta would have sent.
    assert statuses[tester] == "no_callback"
    assert sorted(statuses.values()).count("no_app_role") == 2
    await arrive_by_webhook(world, tester)
    recovered = await reconcile_account(world.resources, world.account_id, force=True)
    assert recovered.recovered == 2

    page, found = await _doctor(owner, world)
    status, said = found["delivery"]
    assert status == "fail"
    assert "2 of 3 comments reached OnceReply only through the reconciler" in said
    assert "Webhooks came only for 1 person, never for the 2 others" in said
    assert "Development mode" in said
    assert "add the commenters as Instagram testers" in said
    seen = page[page.index(f'id="webhooks-seen-{world.account_id}"') :]
    assert re.search(r'data-field="comments">.*?<td>(just now|\d+ minutes? ago)</td>', seen, re.S)
    assert re.search(r'data-field="messages">.*?<td>never</td>', seen, re.S)


async def test_the_handshake_fails_clearly_when_public_base_url_points_elsewhere(
    world: World,
    owner: AsyncTestClient,
    doctor_settings: Settings,  # type: ignore[type-arg]
) -> None:
    await _subscribed(world)
    page = (await owner.get("/setup")).text
    status, said = checks(page, "doctor-server")["handshake"]
    assert status == "fail"
    assert (
        f"{doctor_settings.public_base_url}/webhooks/instagram did not answer the challenge" in said
    )
    assert "points at something other than this OnceReply server" in said
    assert "Webhook address answers Meta" in page[page.index('id="doctor-verdict"') :][:400]

    # The overview remembers the visit and links to the doctor.
    overview = await owner.get("/")
    assert 'id="doctor-link"' in overview.text
    assert 'href="/setup"' in overview.text


async def test_the_handshake_passes_through_this_server(
    world: World, delivery_env: dict[str, str]
) -> None:
    ours = load_settings({**delivery_env, "PUBLIC_BASE_URL": "https://dm.example.com"})
    app = create_app(ours)
    async with AsyncTestClient(app):
        check = await check_handshake(ours, transport=httpx.ASGITransport(app=app))
    assert (check.status.value, check.summary) == (
        "ok",
        "https://dm.example.com/webhooks/instagram answered the verification challenge with "
        "the verify token, as Meta requires.",
    )
    other = load_settings({**delivery_env, "WEBHOOK_VERIFY_TOKEN": "someone-else"})
    async with AsyncTestClient(app):
        refused = await check_handshake(other, transport=httpx.ASGITransport(app=app))
    assert refused.status.value == "fail"
    assert "HTTP 403" in refused.details


async def test_the_overview_links_to_the_doctor_without_a_visit_when_a_field_is_missing(
    world: World,
    owner: AsyncTestClient,  # type: ignore[type-arg]
) -> None:
    await _subscribed(world)
    assert 'id="doctor-link"' not in (await owner.get("/")).text
    await world.execute(
        "UPDATE instagram_accounts SET webhook_fields = '{comments}' WHERE id = :id",
        id=world.account_id,
    )
    overview = (await owner.get("/")).text
    assert 'id="doctor-link"' in overview
    assert "@sunny.bakes: Webhook fields subscribed" in overview


async def test_a_permission_refused_on_instagram_s_screen_is_recorded_and_named(
    delivery_env: dict[str, str], sandbox_process: SandboxProcess
) -> None:
    sandbox_process.admin.reset(keep_webhook=False)
    wired = load_settings(
        {
            **delivery_env,
            "INSTAGRAM_OAUTH_BASE": sandbox_process.base_url,
            # The delivery tests' sandbox runs with its default app secret (sandbox/README.md).
            "INSTAGRAM_APP_SECRET": "sandbox-instagram-app-secret",
            "PUBLIC_BASE_URL": sandbox_process.base_url,
        }
    )
    async with AsyncTestClient(create_app(wired)) as client:
        await sign_up(client, "sunny@example.com", workspace="Sunny Bakes")
        connected = await connect_account(client, refuse=("instagram_business_manage_comments",))
        assert connected.status_code == 303, connected.text
        assert "connected=" in connected.headers["location"]
        account_id = int(connected.headers["location"].rsplit("=", 1)[1])
        page = (await client.get("/setup")).text
    status, said = checks(page, f"account-{account_id}")["permissions"]
    assert status == "fail"
    assert "Not granted: instagram_business_manage_comments" in said
    # The sandbox holds back comments for an account without the permission, as Meta does.
    sandbox_process.admin.fan_comment("jane.doe", LEMON_REEL, "RECIPE")
    [event] = sandbox_process.admin.webhook_events(field="comments")["events"]
    assert event["status"] == "missing_permission"
