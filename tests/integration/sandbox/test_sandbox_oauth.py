"""Instagram Login against the sandbox: authorize page, code exchange, long-lived, refresh."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from authlib.common.security import generate_token
from authlib.integrations.httpx_client import AsyncOAuth2Client

from sandbox.client import SandboxAdmin
from tests.integration.sandbox.helpers import (
    APP_ID,
    APP_SECRET,
    DAY,
    SUNNY,
    SUNNY_APP_SCOPED,
    error_of,
)
from tests.support.sandbox_process import SandboxProcess

REDIRECT = "https://creator-app.example/auth/instagram/callback"
SCOPES = (
    "instagram_business_basic,instagram_business_manage_messages,instagram_business_manage_comments"
)


class _Form(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.action = ""
        self.hidden: dict[str, str] = {}
        self.accounts: list[str] = []
        self.buttons: list[tuple[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form":
            self.action = a.get("action", "")
        elif tag == "input" and a.get("type") == "hidden":
            self.hidden[a["name"]] = a.get("value", "")
        elif tag == "input" and a.get("type") == "radio" and a.get("name") == "account":
            self.accounts.append(a["value"])
        elif tag == "button" and a.get("name"):
            self.buttons.append((a["name"], a.get("value", "")))


async def _authorize(base: str, url: str, decision: str) -> str:
    """Load the authorize page like a browser, submit the form, return the redirect target."""
    async with httpx.AsyncClient(base_url=base) as browser:
        page = await browser.get(url)
        assert page.status_code == 200
        form = _Form()
        form.feed(page.text)
        assert form.action == "/oauth/authorize"
        assert SUNNY in form.accounts
        assert ("decision", decision) in form.buttons
        answer = await browser.post(
            form.action, data={**form.hidden, "account": SUNNY, "decision": decision}
        )
        assert answer.status_code == 302
        return answer.headers["location"]


def _oauth_client(*, pkce: bool = False) -> AsyncOAuth2Client:
    # authlib adds the PKCE challenge only when the client is built with a method.
    return AsyncOAuth2Client(
        client_id=APP_ID,
        client_secret=APP_SECRET,
        scope=SCOPES,
        redirect_uri=REDIRECT,
        token_endpoint_auth_method="client_secret_post",
        **({"code_challenge_method": "S256"} if pkce else {}),
    )


async def test_full_dance_with_authlib(
    sandbox_process: SandboxProcess, admin: SandboxAdmin
) -> None:
    base = sandbox_process.base_url
    async with _oauth_client() as client:
        url, state = client.create_authorization_url(f"{base}/oauth/authorize")
        location = await _authorize(base, url, "allow")

        # Code and the state in the query, "#_" at the very end (not part of the code).
        assert location.startswith(REDIRECT + "?")
        assert location.endswith("#_")
        query = parse_qs(urlsplit(location).query)
        assert query["state"] == [state]
        assert re.fullmatch(r"[A-Za-z0-9_-]+", query["code"][0])

        # A browser never sends the fragment, so the callback sees the URL without it.
        callback = location.split("#", 1)[0]
        token = await client.fetch_token(
            f"{base}/oauth/access_token", authorization_response=callback, state=state
        )
        assert token["access_token"].startswith("IGAA")
        assert token["user_id"] == int(SUNNY_APP_SCOPED)
        assert set(token["permissions"]) == set(SCOPES.split(","))

    async with httpx.AsyncClient(base_url=sandbox_process.graph_base) as graph:
        me = await graph.get(
            "/me",
            params={"fields": "id,user_id,username,account_type"},
            headers={"Authorization": f"Bearer {token['access_token']}"},
        )
        assert me.status_code == 200
        assert me.json() == {
            "id": SUNNY_APP_SCOPED,
            "user_id": SUNNY,
            "username": "sunny.bakes",
            "account_type": "Media_Creator",
        }

        # Long-lived: 60 days.
        long = await graph.get(
            "/access_token",
            params={
                "grant_type": "ig_exchange_token",
                "client_secret": APP_SECRET,
                "access_token": token["access_token"],
            },
        )
        assert long.status_code == 200
        body = long.json()
        assert body["token_type"] == "bearer"
        assert 60 * DAY - 60 <= body["expires_in"] <= 60 * DAY
        long_token = body["access_token"]

        # Refresh is refused while the token is younger than 24 hours...
        refresh = {"grant_type": "ig_refresh_token", "access_token": long_token}
        early = await graph.get("/refresh_access_token", params=refresh)
        assert early.status_code == 400
        assert error_of(early)["code"] == 100

        # ...and allowed after a day, for another 60 days.
        admin.advance_clock(DAY + 60)
        later = await graph.get("/refresh_access_token", params=refresh)
        assert later.status_code == 200, later.text
        assert later.json()["access_token"] != long_token
        assert later.json()["expires_in"] >= 60 * DAY - 60

        # The short-lived token died after its hour: 190/463, the "Session has expired" one.
        expired = await graph.get("/me", params={"access_token": token["access_token"]})
        assert expired.status_code == 400
        error = error_of(expired)
        assert (error["code"], error["error_subcode"], error["type"]) == (
            190,
            463,
            "OAuthException",
        )
        assert "Session has expired" in error["message"]


async def test_deny_redirects_with_the_documented_error(
    sandbox_process: SandboxProcess, admin: SandboxAdmin
) -> None:
    async with _oauth_client() as client:
        url, state = client.create_authorization_url(f"{sandbox_process.base_url}/oauth/authorize")
    location = await _authorize(sandbox_process.base_url, url, "deny")
    query = parse_qs(urlsplit(location).query)
    assert query == {
        "error": ["access_denied"],
        "error_reason": ["user_denied"],
        "error_description": ["The user denied your request"],
        "state": [state],
    }


async def _code(sandbox_process: SandboxProcess) -> str:
    async with _oauth_client() as client:
        url, _ = client.create_authorization_url(f"{sandbox_process.base_url}/oauth/authorize")
    location = await _authorize(sandbox_process.base_url, url, "allow")
    return parse_qs(urlsplit(location).query)["code"][0]


def _exchange_form(code: str, **overrides: str) -> dict[str, str]:
    return {
        "client_id": APP_ID,
        "client_secret": APP_SECRET,
        "grant_type": "authorization_code",
        "redirect_uri": REDIRECT,
        "code": code,
    } | overrides


async def test_code_is_single_use_with_the_legacy_error_shape(
    sandbox_process: SandboxProcess, admin: SandboxAdmin
) -> None:
    code = await _code(sandbox_process)
    async with httpx.AsyncClient(base_url=sandbox_process.base_url) as http:
        first = await http.post("/oauth/access_token", data=_exchange_form(code))
        assert first.status_code == 200
        # user_id is a bare JSON number above 2**53, written out digit for digit.
        assert f'"user_id":{SUNNY_APP_SCOPED}'.encode() in first.content
        assert int(SUNNY_APP_SCOPED) > 2**53

        again = await http.post("/oauth/access_token", data=_exchange_form(code))
        assert again.status_code == 400
        assert again.json() == {
            "error_type": "OAuthException",
            "code": 400,
            "error_message": "Matching code was not found or was already used",
        }


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            {"redirect_uri": "https://creator-app.example/other"},
            "Redirect URI does not match registered redirect URI",
        ),
        ({"client_secret": "wrong"}, "Error validating client secret."),
        ({"client_id": "999"}, "Invalid platform app"),
    ],
)
async def test_exchange_rejections(
    sandbox_process: SandboxProcess, admin: SandboxAdmin, override: dict[str, str], message: str
) -> None:
    code = await _code(sandbox_process)
    async with httpx.AsyncClient(base_url=sandbox_process.base_url) as http:
        answer = await http.post("/oauth/access_token", data=_exchange_form(code, **override))
        assert answer.status_code == 400
        assert answer.json()["error_message"] == message
        # The failed attempt did not use the code up.
        assert (
            await http.post("/oauth/access_token", data=_exchange_form(code))
        ).status_code == 200


async def _pkce_code(sandbox_process: SandboxProcess, verifier: str) -> str:
    async with _oauth_client(pkce=True) as client:
        url, _ = client.create_authorization_url(
            f"{sandbox_process.base_url}/oauth/authorize", code_verifier=verifier
        )
    assert parse_qs(urlsplit(url).query)["code_challenge_method"] == ["S256"]
    location = await _authorize(sandbox_process.base_url, url, "allow")
    return parse_qs(urlsplit(location).query)["code"][0]


async def test_pkce_the_right_verifier_gets_the_token_with_authlib(
    sandbox_process: SandboxProcess, admin: SandboxAdmin
) -> None:
    verifier = generate_token(64)
    base = sandbox_process.base_url
    async with _oauth_client(pkce=True) as client:
        url, state = client.create_authorization_url(
            f"{base}/oauth/authorize", code_verifier=verifier
        )
        location = await _authorize(base, url, "allow")
        token = await client.fetch_token(
            f"{base}/oauth/access_token",
            authorization_response=location.split("#", 1)[0],
            state=state,
            code_verifier=verifier,
        )
    assert token["access_token"].startswith("IGAA")


@pytest.mark.parametrize(
    ("verifier", "message"),
    [
        (None, "You must provide a code_verifier"),
        ("v" * 64, "Invalid code_verifier"),  # well formed, but not the one hashed
        ("short", "Invalid code_verifier"),
    ],
)
async def test_pkce_a_missing_or_wrong_verifier_is_refused(
    sandbox_process: SandboxProcess, admin: SandboxAdmin, verifier: str | None, message: str
) -> None:
    right = generate_token(64)
    code = await _pkce_code(sandbox_process, right)
    wrong = {"code_verifier": verifier} if verifier is not None else {}
    async with httpx.AsyncClient(base_url=sandbox_process.base_url) as http:
        answer = await http.post("/oauth/access_token", data=_exchange_form(code, **wrong))
        assert answer.status_code == 400
        assert answer.json() == {
            "error_type": "OAuthException",
            "code": 400,
            "error_message": message,
        }
        # The refusal did not use the code up: its own verifier still works, once.
        form = _exchange_form(code, code_verifier=right)
        assert (await http.post("/oauth/access_token", data=form)).status_code == 200
        assert (await http.post("/oauth/access_token", data=form)).status_code == 400


async def test_pkce_only_s256_is_accepted_at_authorize(
    sandbox_process: SandboxProcess, admin: SandboxAdmin
) -> None:
    params = {
        "client_id": APP_ID,
        "redirect_uri": REDIRECT,
        "response_type": "code",
        "scope": SCOPES,
        "code_challenge": generate_token(64),
    }
    async with httpx.AsyncClient(base_url=sandbox_process.base_url) as http:
        for method in ({"code_challenge_method": "plain"}, {}):
            page = await http.get("/oauth/authorize", params=params | method)
            assert page.status_code == 400
            assert "only S256 is supported" in page.text


async def test_code_expires_after_an_hour(
    sandbox_process: SandboxProcess, admin: SandboxAdmin
) -> None:
    code = await _code(sandbox_process)
    admin.advance_clock(3601)
    async with httpx.AsyncClient(base_url=sandbox_process.base_url) as http:
        answer = await http.post("/oauth/access_token", data=_exchange_form(code))
    assert answer.status_code == 400
    assert answer.json()["error_type"] == "OAuthException"


async def test_documented_data_wrapper_shape_is_switchable(
    sandbox_process: SandboxProcess, admin: SandboxAdmin
) -> None:
    admin.update_settings(token_response_shape="data")
    code = await _code(sandbox_process)
    async with httpx.AsyncClient(base_url=sandbox_process.base_url) as http:
        answer = await http.post("/oauth/access_token", data=_exchange_form(code))
    data = answer.json()["data"]
    assert data[0]["user_id"] == SUNNY_APP_SCOPED
    assert data[0]["permissions"] == SCOPES


async def test_authorize_page_rejects_a_foreign_app(
    sandbox_process: SandboxProcess, admin: SandboxAdmin
) -> None:
    async with httpx.AsyncClient(base_url=sandbox_process.base_url) as http:
        page = await http.get(
            "/oauth/authorize",
            params={
                "client_id": "42",
                "redirect_uri": REDIRECT,
                "response_type": "code",
                "scope": SCOPES,
            },
        )
    assert page.status_code == 400
    assert "Invalid platform app" in page.text


def test_long_lived_token_expires_after_sixty_days(
    graph: httpx.Client, admin: SandboxAdmin, token: str
) -> None:
    assert graph.get("/me", params={"access_token": token}).status_code == 200
    admin.advance_clock(60 * DAY + 1)
    expired = graph.get("/me", params={"access_token": token})
    assert (error_of(expired)["code"], error_of(expired)["error_subcode"]) == (190, 463)
    # An expired long-lived token cannot be refreshed either.
    refused = graph.get(
        "/refresh_access_token", params={"grant_type": "ig_refresh_token", "access_token": token}
    )
    assert error_of(refused)["error_subcode"] == 463


def test_unknown_and_revoked_tokens(graph: httpx.Client, admin: SandboxAdmin, token: str) -> None:
    unknown = graph.get("/me", headers={"Authorization": "Bearer IGAAnot-a-real-token"})
    assert unknown.status_code == 400
    error = error_of(unknown)
    assert (error["code"], error["error_subcode"], error["type"]) == (190, 467, "OAuthException")
    assert admin.revoke_tokens(account="sunny.bakes") == {"revoked": 1}
    revoked = graph.get("/me", params={"access_token": token})
    assert error_of(revoked)["error_subcode"] == 460
