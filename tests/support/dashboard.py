"""Helpers for dashboard tests: reading forms out of pages, signing up, connecting a sandbox
account through the real OAuth pages.

Integration tests drive the app in-process (`litestar.testing.AsyncTestClient`) and the
sandbox over real HTTP; browser tests use the same sandbox wiring (`sandbox_env`,
`web_env_for`). Everything here talks HTTP only, like a person with a browser would.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urlsplit

import httpx

# The sandbox's default fixture (sandbox/fixtures/default.json).
SUNNY = "17841458120395731"  # @sunny.bakes, the professional account id (/me.user_id)
SUNNY_APP_SCOPED = "27640875392278831"  # its app-scoped id (/me.id): never the one to store
NORTH = "17841462908174420"  # @north.trails
LEMON_REEL = "17918195224117851"  # sunny's newest post: "Comment RECIPE for the full recipe!"
STARTER_POST = "17918195224117852"
PASSWORD = "correct horse battery staple"


def sandbox_env(test_env: dict[str, str]) -> dict[str, str]:
    """The sandbox speaks for the same Instagram app as our processes."""
    return {
        "SANDBOX_INSTAGRAM_APP_ID": test_env["INSTAGRAM_APP_ID"],
        "SANDBOX_INSTAGRAM_APP_SECRET": test_env["INSTAGRAM_APP_SECRET"],
        "SANDBOX_META_APP_SECRET": test_env["META_APP_SECRET"],
    }


def web_env_for(
    test_env: dict[str, str], sandbox_base_url: str, public_base_url: str | None = None
) -> dict[str, str]:
    """Our settings pointed at the sandbox for the Graph API and Instagram Login (and, for DM
    images, at its image host on loopback, as in development)."""
    env = {
        **test_env,
        "GRAPH_API_BASE": f"{sandbox_base_url}/v25.0",
        "INSTAGRAM_OAUTH_BASE": sandbox_base_url,
        "IMAGE_CHECK_ALLOW_LOOPBACK": "true",
    }
    if public_base_url:
        env["PUBLIC_BASE_URL"] = public_base_url
    return env


@dataclass
class Form:
    action: str
    method: str
    fields: dict[str, str] = field(default_factory=dict)
    buttons: list[tuple[str, str]] = field(default_factory=list)
    radios: dict[str, list[str]] = field(default_factory=dict)


class _FormParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.forms: list[Form] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form":
            self.forms.append(Form(action=a.get("action", ""), method=a.get("method", "get")))
            return
        if not self.forms:
            return
        form = self.forms[-1]
        if tag == "input" and a.get("name"):
            kind = a.get("type", "text")
            if kind == "radio":
                form.radios.setdefault(a["name"], []).append(a.get("value", ""))
                if "checked" in a:
                    form.fields[a["name"]] = a.get("value", "")
            elif kind == "checkbox":
                if "checked" in a:
                    form.fields[a["name"]] = a.get("value") or "on"
            else:
                form.fields[a["name"]] = a.get("value", "")
        elif tag == "button" and a.get("name"):
            form.buttons.append((a["name"], a.get("value", "")))


def forms_in(html: str) -> list[Form]:
    parser = _FormParser()
    parser.feed(html)
    return parser.forms


def form_for(html: str, action: str) -> Form:
    """The form posting to `action` (the first one, when there are several)."""
    for form in forms_in(html):
        if form.action == action:
            return form
    raise AssertionError(f"no form with action {action!r} in the page")


def tokens(html: str, action: str) -> dict[str, str]:
    """The hidden CSRF and idempotency fields of the form posting to `action`."""
    fields = form_for(html, action).fields
    return {name: fields[name] for name in ("_csrf_token", "_idem") if name in fields}


def csrf_token(html: str) -> str:
    """The CSRF token rendered into any page (every form carries the same one)."""
    match = re.search(r'name="_csrf_token" value="([^"]+)"', html)
    assert match, "no CSRF token in the page"
    return match.group(1)


def error_for(html: str, field_name: str) -> str | None:
    """The error message shown next to a field, if any."""
    match = re.search(
        rf'data-error-for="{re.escape(field_name)}"[^>]*>(.*?)</p>', html, flags=re.DOTALL
    )
    return match.group(1).strip() if match else None


async def sign_up(
    client: Any, email: str, password: str = PASSWORD, workspace: str | None = None
) -> httpx.Response:
    """Sign up through the page; the client ends up signed in (cookie jar)."""
    page = await client.get("/signup")
    data = {
        **tokens(page.text, "/signup"),
        "email": email,
        "password": password,
        "workspace": workspace or "",
    }
    response: httpx.Response = await client.post("/signup", data=data, follow_redirects=False)
    assert response.status_code == 303, response.text
    return response


async def start_connect(client: Any) -> str:
    """Press "Connect Instagram"; returns where the browser is sent (the authorize page)."""
    page = await client.get("/accounts")
    response = await client.post(
        "/accounts/connect", data=tokens(page.text, "/accounts/connect"), follow_redirects=False
    )
    assert response.status_code == 303, response.text
    location: str = response.headers["location"]
    return location


async def consent(
    authorize_url: str, *, account: str = SUNNY, allow: bool = True, refuse: tuple[str, ...] = ()
) -> str:
    """Play the person on the sandbox's consent page, unticking the permissions in `refuse`;
    returns the callback path and query."""
    async with httpx.AsyncClient(timeout=10) as browser:
        page = await browser.get(authorize_url)
        assert page.status_code == 200, page.text
        form = form_for(page.text, "/oauth/authorize")
        assert account in form.radios.get("account", []), form
        parts = urlsplit(authorize_url)
        answer = await browser.post(
            f"{parts.scheme}://{parts.netloc}/oauth/authorize",
            data={
                **form.fields,
                **{f"refuse_{scope}": "1" for scope in refuse},
                "account": account,
                "decision": "allow" if allow else "deny",
            },
        )
        assert answer.status_code == 302, answer.text
    # A browser never sends the `#_` fragment Instagram appends; neither do we.
    target = urlsplit(answer.headers["location"])
    return f"{target.path}?{target.query}"


async def connect_account(
    client: Any, *, account: str = SUNNY, refuse: tuple[str, ...] = ()
) -> httpx.Response:
    """The whole Connect Instagram flow; returns our callback's answer (a redirect)."""
    callback = await consent(await start_connect(client), account=account, refuse=refuse)
    response: httpx.Response = await client.get(callback, follow_redirects=False)
    return response


async def identity_of(resources: Any, email: str) -> tuple[int, int]:
    """(user id, workspace id) of the user with this email (their first workspace)."""
    from sqlalchemy import select

    from app.db.models import User, WorkspaceMember

    async with resources.sessionmaker() as session:
        row = (
            await session.execute(
                select(User.id, WorkspaceMember.workspace_id)
                .join(WorkspaceMember, WorkspaceMember.user_id == User.id)
                .where(User.email == email.lower())
                .order_by(WorkspaceMember.created_at)
                .limit(1)
            )
        ).one()
    return row[0], row[1]


async def add_account(
    resources: Any,
    workspace_id: int,
    *,
    ig_user_id: str = SUNNY,
    username: str = "sunny.bakes",
    token: str = "IGAA-test-token",  # noqa: S107 - a fake token for the sandbox-free tests
) -> int:
    """Store a connected account directly (for tests that do not need the OAuth dance)."""
    from datetime import UTC, datetime, timedelta

    from app.accounts.connect import upsert_account

    async with resources.sessionmaker() as session, session.begin():
        account_id = await upsert_account(
            session,
            resources,
            workspace_id=workspace_id,
            ig_user_id=ig_user_id,
            me={"user_id": ig_user_id, "username": username, "id": "1" + ig_user_id[1:]},
            token=token,
            expires_at=datetime.now(UTC) + timedelta(days=60),
        )
    assert account_id is not None
    return account_id
