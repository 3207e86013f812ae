"""What the setup doctor diagnoses, as the sandbox models it: an app in Development mode sends
webhooks only for fans with a role on the app; a field's events need the permission it
requires (a person may refuse one on the consent page); an unsubscribed field sends nothing."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx

from sandbox.client import SandboxAdmin
from tests.integration.sandbox.helpers import APP_ID, APP_SECRET, LEMON_REEL, SUNNY
from tests.support.sandbox_process import SandboxProcess, WebhookReceiver

REDIRECT = "https://app.example.com/accounts/instagram/callback"
SCOPES = (
    "instagram_business_basic",
    "instagram_business_manage_comments",
    "instagram_business_manage_messages",
)


def _statuses(admin: SandboxAdmin) -> dict[str, str]:
    admin.flush_webhooks()
    events = admin.webhook_events()["events"]
    return {e["value"].get("text") or e["value"]["message"]["text"]: e["status"] for e in events}


def test_development_mode_sends_only_for_fans_with_an_app_role(
    admin: SandboxAdmin, receiver: WebhookReceiver
) -> None:
    admin.mint_token("sunny.bakes", subscribe=["comments", "messages"])
    admin.set_app_mode("development", roles=["jane.doe"])
    admin.fan_comment("jane.doe", LEMON_REEL, "from a tester")
    admin.fan_comment("marco_rossi", LEMON_REEL, "from the public")
    statuses = _statuses(admin)
    assert statuses["from the public"] == "no_app_role"
    assert statuses["from a tester"] != "no_app_role"
    posts = receiver.wait_for(1)
    texts = [c["value"]["text"] for p in posts for e in p.json()["entry"] for c in e["changes"]]
    assert texts == ["from a tester"]
    admin.set_app_mode("live")
    admin.fan_comment("marco_rossi", LEMON_REEL, "after going live")
    assert _statuses(admin)["after going live"] in {"pending", "sending", "delivered"}


def test_a_field_needs_its_permission(admin: SandboxAdmin, receiver: WebhookReceiver) -> None:
    admin.mint_token(
        "sunny.bakes",
        scopes=["instagram_business_basic", "instagram_business_manage_messages"],
        subscribe=["comments", "messages"],
    )
    admin.fan_comment("jane.doe", LEMON_REEL, "no comments permission")
    assert _statuses(admin)["no comments permission"] == "missing_permission"
    assert receiver.posts() == []


def test_an_unsubscribed_field_sends_nothing_until_subscribed_again(
    admin: SandboxAdmin, receiver: WebhookReceiver, sandbox_process: SandboxProcess
) -> None:
    token = admin.mint_token("sunny.bakes", subscribe=["comments", "messages"])["access_token"]
    changed = admin.set_subscription("sunny.bakes", ["comments"])
    assert changed["subscribed_fields"] == ["comments"]
    admin.fan_dm("jane.doe", "sunny.bakes", "hello?")
    assert _statuses(admin)["hello?"] == "not_subscribed"
    with httpx.Client(base_url=sandbox_process.graph_base) as graph:
        listed = graph.get(f"/{SUNNY}/subscribed_apps", params={"access_token": token}).json()
        assert listed["data"][0]["subscribed_fields"] == ["comments"]
        again = graph.post(
            f"/{SUNNY}/subscribed_apps",
            params={"subscribed_fields": "comments,messages", "access_token": token},
        )
        assert again.json() == {"success": True}
    admin.fan_dm("jane.doe", "sunny.bakes", "now?")
    assert _statuses(admin)["now?"] in {"pending", "sending", "delivered"}


async def test_the_consent_page_lets_a_permission_be_refused(
    sandbox_process: SandboxProcess, admin: SandboxAdmin
) -> None:
    base = sandbox_process.base_url
    query = urlencode(
        {
            "client_id": APP_ID,
            "redirect_uri": REDIRECT,
            "response_type": "code",
            "scope": ",".join(SCOPES),
            "state": "s",
        }
    )
    async with httpx.AsyncClient(base_url=base) as browser:
        page = await browser.get(f"/oauth/authorize?{query}")
        request_id = re.search(r'name="request_id" value="([^"]+)"', page.text)
        assert request_id, page.text
        assert 'name="refuse_instagram_business_manage_messages"' in page.text
        answer = await browser.post(
            "/oauth/authorize",
            data={
                "request_id": request_id[1],
                "account": SUNNY,
                "decision": "allow",
                "refuse_instagram_business_manage_messages": "1",
            },
        )
        code = parse_qs(urlsplit(answer.headers["location"]).query)["code"][0]
        token = await browser.post(
            "/oauth/access_token",
            data={
                "client_id": APP_ID,
                "client_secret": APP_SECRET,
                "grant_type": "authorization_code",
                "redirect_uri": REDIRECT,
                "code": code,
            },
        )
    assert token.json()["permissions"] == [
        "instagram_business_basic",
        "instagram_business_manage_comments",
    ]
