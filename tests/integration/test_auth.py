"""Sign-up, sign-in, sessions, CSRF, throttling and roles, through the real middleware stack.

The app runs in-process against the run's PostgreSQL and Redis; every request goes through
CSRF, the Redis session store and the auth dependencies exactly as in production.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import httpx
import pytest
from litestar.testing import AsyncTestClient
from redis.asyncio import Redis
from sqlalchemy import func, select

from app.asgi import create_app
from app.auth.passwords import hash_password
from app.auth.sessions import SECURE_SESSION_COOKIE, SESSION_COOKIE, SESSION_NAMESPACE
from app.auth.throttle import ThrottlePolicy
from app.db.models import IdempotencyKey, Role, User, Workspace, WorkspaceMember
from app.resources import Resources
from app.settings import Settings, load_settings
from tests.support.dashboard import PASSWORD, csrf_token, sign_up, tokens

EMAIL = "sunny@example.com"


@pytest.fixture
async def client(settings: Settings) -> AsyncIterator[AsyncTestClient]:  # type: ignore[type-arg]
    async with AsyncTestClient(create_app(settings)) as test_client:
        yield test_client


async def _login(client: AsyncTestClient, email: str, password: str):  # type: ignore[type-arg,no-untyped-def]
    page = await client.get("/login")  # a signed-in browser lands on the dashboard instead
    return await client.post(
        "/login",
        data={"_csrf_token": csrf_token(page.text), "email": email, "password": password},
        follow_redirects=False,
    )


def _session_cookie(client: AsyncTestClient) -> str | None:  # type: ignore[type-arg]
    value = client.cookies.get(SESSION_COOKIE)
    return value if value and value != "null" else None


def _session_set_by(response: httpx.Response) -> str | None:
    """The session id this one answer gave the browser, if it signed it in."""
    for header in response.headers.get_list("set-cookie"):
        name, _, rest = header.partition("=")
        value = rest.split(";", 1)[0]
        if name == SESSION_COOKIE and value and value != "null":
            return value
    return None


async def _signed_in_as(settings: Settings, cookie: str | None) -> bool:
    """Does this session id (alone, in another browser) open the dashboard?"""
    async with AsyncTestClient(create_app(settings)) as other:
        if cookie:
            other.cookies.set(SESSION_COOKIE, cookie)
        response = await other.get("/", follow_redirects=False, headers={"accept": "text/html"})
        return response.status_code == 200


async def test_signup_creates_a_workspace_and_signs_in(
    client: AsyncTestClient,
    test_env: dict[str, str],  # type: ignore[type-arg]
) -> None:
    response = await sign_up(client, EMAIL, workspace="Sunny Bakes")
    assert response.headers["location"] == "/accounts?welcome=1"
    home = await client.get("/")
    assert home.status_code == 200
    assert "Sunny Bakes" in home.text
    assert 'action="/logout"' in home.text

    cookie = client.cookies.get(SESSION_COOKIE)
    assert cookie
    set_cookie = response.headers["set-cookie"]
    assert "HttpOnly" in set_cookie
    assert "samesite=lax" in set_cookie.lower()
    assert "Secure" not in set_cookie  # PUBLIC_BASE_URL is http in tests


async def test_signup_does_not_say_an_email_is_taken_and_refuses_a_short_password(
    client: AsyncTestClient,  # type: ignore[type-arg]
    settings: Settings,
    resources: Resources,
    test_env: dict[str, str],  # type: ignore[type-arg]
) -> None:
    await sign_up(client, EMAIL)
    async with resources.sessionmaker() as session:
        stored_hash = await session.scalar(select(User.password_hash).where(User.email == EMAIL))
    async with AsyncTestClient(create_app(settings)) as other:
        page = await other.get("/signup")
        # A taken email gets the usual path, a 303 to sign in with a notice that reads the same
        # for any email, and not "already exists"; the account is left as it was.
        taken = await other.post(
            "/signup",
            data={
                **tokens(page.text, "/signup"),
                "email": EMAIL.upper(),
                "password": "another password entirely",
            },
            follow_redirects=False,
        )
        assert taken.status_code == 303
        assert taken.headers["location"] == "/login?existing=1"
        assert "already exists" not in taken.text
        assert _session_cookie(other) is None
        notice = await other.get(taken.headers["location"])
        assert "If this email already has an account, sign in with it." in notice.text
        assert "already exists" not in notice.text
        async with resources.sessionmaker() as session:
            assert (
                await session.scalar(select(User.password_hash).where(User.email == EMAIL))
            ) == stored_hash
            assert await session.scalar(select(func.count()).select_from(User)) == 1
        short = await other.post(
            "/signup",
            data={**tokens(page.text, "/signup"), "email": "new@example.com", "password": "short"},
        )
        assert short.status_code == 422
        assert "at least 10 characters" in short.text
        assert _session_cookie(other) is None


async def test_a_double_submitted_sign_up_makes_one_account_and_signs_both_in(
    client: AsyncTestClient,  # type: ignore[type-arg]
    settings: Settings,
    resources: Resources,
    test_env: dict[str, str],
) -> None:
    page = await client.get("/signup")
    form = tokens(page.text, "/signup")
    assert form.keys() == {"_csrf_token", "_idem"}
    data = {**form, "email": EMAIL, "password": PASSWORD, "workspace": "Sunny Bakes"}

    # A double click sends both submissions before either answer arrives, so neither carries
    # a session cookie. (The in-process client runs one request at a time; racing claims of a
    # key are covered in test_idempotency.)
    answers = []
    for _ in range(2):
        client.cookies.delete(SESSION_COOKIE)
        answers.append(await client.post("/signup", data=data, follow_redirects=False))
    assert [(a.status_code, a.headers.get("location")) for a in answers] == [
        (303, "/accounts?welcome=1"),
        (303, "/accounts?welcome=1"),
    ]
    sessions = [_session_set_by(answer) for answer in answers]
    assert None not in sessions
    assert sessions[0] != sessions[1]
    for session_id in sessions:
        assert await _signed_in_as(settings, session_id)

    async with resources.sessionmaker() as session:
        counts = [
            await session.scalar(select(func.count()).select_from(table))
            for table in (User, Workspace, WorkspaceMember)
        ]
        keys = (await session.execute(select(IdempotencyKey.scope, IdempotencyKey.status))).all()
    assert counts == [1, 1, 1]
    assert [(scope, status.value) for scope, status in keys] == [("auth.signup", "succeeded")]

    # A later repeat of that form gets the same answer; with another password it signs no
    # one in, and the same key for another email is refused.
    again = await client.post("/signup", data=data, follow_redirects=False)
    assert again.headers.get("location") == "/accounts?welcome=1"
    wrong = await client.post(
        "/signup", data={**data, "password": "not the same password"}, follow_redirects=False
    )
    assert wrong.status_code == 303
    assert wrong.headers["location"] == "/login?existing=1"
    assert _session_set_by(wrong) is None
    other = await client.post(
        "/signup", data={**data, "email": "other@example.com"}, follow_redirects=False
    )
    assert other.status_code == 422
    assert "That form was already used" in other.text


def _cookie_set_by(response: httpx.Response, name: str) -> str:
    """The Set-Cookie header of this answer for cookie `name` (fails if it set none)."""
    headers = [h for h in response.headers.get_list("set-cookie") if h.startswith(f"{name}=")]
    assert len(headers) == 1, response.headers.get_list("set-cookie")
    return headers[0]


def _flags(set_cookie: str) -> set[str]:
    return {part.strip().lower() for part in set_cookie.split(";")[1:]}


async def test_cookies_are_secure_behind_https(test_env: dict[str, str]) -> None:
    settings = load_settings({**test_env, "PUBLIC_BASE_URL": "https://oncereply.example"})
    async with AsyncTestClient(create_app(settings), base_url="https://testserver.local") as c:
        # The CSRF cookie comes with the first page a visitor opens.
        # Both under `__Host-` names: no other origin (a port, a subdomain) can set them.
        first = await c.get("/signup")
        csrf_flags = _flags(_cookie_set_by(first, "__Host-csrftoken"))
        assert {"secure", "httponly", "samesite=lax", "path=/"} <= csrf_flags
        assert not any(flag.startswith("domain") for flag in csrf_flags)
        response = await sign_up(c, EMAIL)
        session_flags = _flags(_cookie_set_by(response, SECURE_SESSION_COOKIE))
        assert {"secure", "httponly", "samesite=lax", "path=/"} <= session_flags
        assert not any(flag.startswith("domain") for flag in session_flags)
        home = await c.get("/", headers={"accept": "text/html"}, follow_redirects=False)
        assert home.status_code == 200


async def test_cookies_work_on_plain_http_for_local_runs(
    client: AsyncTestClient,  # type: ignore[type-arg]
    test_env: dict[str, str],
) -> None:
    # PUBLIC_BASE_URL is http in tests, as with `make dev`: a Secure cookie would be dropped.
    flags = _flags(_cookie_set_by(await client.get("/login"), "csrftoken"))
    assert {"httponly", "samesite=lax"} <= flags
    assert "secure" not in flags


async def test_forms_without_the_csrf_token_are_refused(
    client: AsyncTestClient,
    test_env: dict[str, str],  # type: ignore[type-arg]
) -> None:
    await client.get("/login")  # the CSRF cookie alone is not enough
    refused = await client.post(
        "/login", data={"email": EMAIL, "password": PASSWORD}, follow_redirects=False
    )
    assert refused.status_code == 403

    await sign_up(client, EMAIL)
    page = await client.get("/accounts")
    no_token = await client.post("/accounts/connect", data={"_idem": "x" * 32})
    assert no_token.status_code == 403
    wrong = await client.post(
        "/accounts/connect", data={"_csrf_token": "forged" * 20, "_idem": "x" * 32}
    )
    assert wrong.status_code == 403
    logout_without = await client.post("/logout", follow_redirects=False)
    assert logout_without.status_code == 403

    # The same forms with the page's token go through.
    accepted = await client.post(
        "/logout", data=tokens(page.text, "/logout"), follow_redirects=False
    )
    assert accepted.status_code == 303


async def test_htmx_requests_pass_csrf_with_the_header(
    client: AsyncTestClient,
    test_env: dict[str, str],  # type: ignore[type-arg]
) -> None:
    await sign_up(client, EMAIL)
    page = await client.get("/accounts")
    token = tokens(page.text, "/logout")["_csrf_token"]
    preview = await client.post(
        "/campaigns/preview",
        data={"dm_text": "Hi {username}"},
        headers={"x-csrftoken": token, "hx-request": "true"},
    )
    assert preview.status_code == 200
    assert "Hi jane.doe" in preview.text
    refused = await client.post(
        "/campaigns/preview", data={"dm_text": "Hi"}, headers={"hx-request": "true"}
    )
    assert refused.status_code == 403


async def test_the_session_id_changes_at_sign_in_and_the_old_one_stops_working(
    client: AsyncTestClient,  # type: ignore[type-arg]
    settings: Settings,
    test_env: dict[str, str],  # type: ignore[type-arg]
) -> None:
    await sign_up(client, EMAIL)
    first = _session_cookie(client)
    assert first
    assert await _signed_in_as(settings, first)

    # An id planted before sign-in (session fixation) is never the one signed in.
    planted = "a" * 64
    client.cookies.set(SESSION_COOKIE, planted, domain="testserver.local")
    response = await _login(client, EMAIL, PASSWORD)
    assert response.status_code == 303
    second = _session_cookie(client)
    assert second
    assert second not in {first, planted}
    assert await _signed_in_as(settings, second)
    assert not await _signed_in_as(settings, planted)

    # Signing in again from a signed-in session rotates again and kills the previous id.
    response = await _login(client, EMAIL, PASSWORD)
    third = _session_cookie(client)
    assert third
    assert third != second
    assert await _signed_in_as(settings, third)
    assert not await _signed_in_as(settings, second)


async def test_sessions_live_in_redis_under_their_namespace(
    client: AsyncTestClient,
    settings: Settings,
    test_env: dict[str, str],  # type: ignore[type-arg]
) -> None:
    await client.get("/login")
    redis = Redis.from_url(settings.redis_url)
    try:
        assert await redis.keys(f"{SESSION_NAMESPACE}:*") == []  # visitors get no session
        await sign_up(client, EMAIL)
        cookie = _session_cookie(client)
        assert await redis.exists(f"{SESSION_NAMESPACE}:{cookie}")
    finally:
        await redis.aclose()


async def test_sign_out_deletes_the_session(
    client: AsyncTestClient,  # type: ignore[type-arg]
    settings: Settings,
    test_env: dict[str, str],  # type: ignore[type-arg]
) -> None:
    await sign_up(client, EMAIL)
    cookie = _session_cookie(client)
    page = await client.get("/")
    response = await client.post(
        "/logout", data=tokens(page.text, "/logout"), follow_redirects=False
    )
    assert response.headers["location"] == "/login?signed_out=1"
    # The browser is told to forget the cookie now, not to keep a placeholder for 14 days.
    expired = _flags(_cookie_set_by(response, SESSION_COOKIE))
    assert "max-age=0" in expired
    assert _session_cookie(client) is None
    assert not await _signed_in_as(settings, cookie)
    again = await client.get("/campaigns", follow_redirects=False, headers={"accept": "text/html"})
    assert again.status_code == 303
    assert again.headers["location"] == "/login?next=/campaigns"


async def test_sign_in_returns_to_the_page_asked_for_but_never_off_site(
    client: AsyncTestClient,
    test_env: dict[str, str],  # type: ignore[type-arg]
) -> None:
    await sign_up(client, EMAIL)
    client.cookies.clear()
    for asked, landed in (
        ("/campaigns", "/campaigns"),
        ("//evil.example/x", "/"),
        ("https://evil.example", "/"),
    ):
        client.cookies.clear()
        page = await client.get("/login", params={"next": asked})
        response = await client.post(
            "/login",
            data={
                **tokens(page.text, "/login"),
                "email": EMAIL,
                "password": PASSWORD,
                "next": asked,
            },
            follow_redirects=False,
        )
        assert response.headers["location"] == landed


async def test_failed_sign_ins_are_slowed_then_refused_and_success_resets(
    client: AsyncTestClient,
    test_env: dict[str, str],  # type: ignore[type-arg]
) -> None:
    await sign_up(client, EMAIL)
    client.cookies.clear()  # a visitor again
    policy = ThrottlePolicy()
    page = await client.get("/login")
    form = tokens(page.text, "/login")

    async def attempt(password: str) -> tuple[int, float, str]:
        started = time.monotonic()
        response = await client.post(
            "/login",
            data={**form, "email": EMAIL, "password": password, "next": "/"},
            follow_redirects=False,
        )
        return response.status_code, time.monotonic() - started, response.text

    # A few mistakes, then a success, which clears the count.
    for _ in range(policy.free_failures):
        status, _, text = await attempt("wrong password 1")
        assert status == 400
        assert "do not match" in text
    status, _, _ = await attempt(PASSWORD)
    assert status == 303

    # Counting from zero again (were it not reset, the lock below would come 4 attempts
    # early): the first few are free, then each waits longer than the one before.
    for _ in range(policy.free_failures):
        status, _, _ = await attempt("wrong password 2")
        assert status == 400
    slowed = 0.0
    for n in range(policy.free_failures + 1, policy.lock_after + 1):
        status, elapsed, _ = await attempt("wrong password 3")
        assert status == 400
        assert elapsed >= policy.delay_for(n) * 0.9, (n, elapsed)
        slowed += elapsed
    expected = sum(
        policy.delay_for(n) for n in range(policy.free_failures + 1, policy.lock_after + 1)
    )
    assert slowed >= expected * 0.9

    # Then refused for a while, even with the right password, with a clear message and
    # without the wait (nothing is checked).
    status, elapsed, text = await attempt(PASSWORD)
    assert status == 429
    assert "Too many failed sign-in attempts" in text
    assert "15 minutes" in text
    assert elapsed < policy.max_delay_s


async def test_one_address_trying_many_emails_is_slowed_but_never_locks_everyone_out(
    client: AsyncTestClient,  # type: ignore[type-arg]
    test_env: dict[str, str],
) -> None:
    await sign_up(client, EMAIL)
    client.cookies.clear()
    policy = ThrottlePolicy()
    page = await client.get("/login")
    form = tokens(page.text, "/login")

    async def attempt(email: str, password: str) -> tuple[int, float]:
        started = time.monotonic()
        response = await client.post(
            "/login",
            data={**form, "email": email, "password": password},
            follow_redirects=False,
        )
        return response.status_code, time.monotonic() - started

    for n in range(1, policy.address_free_failures + 3):
        status, elapsed = await attempt(f"guess{n}@example.com", "wrong password")
        assert status == 400  # a different email each time: no email is locked
        wait = policy.delay_for(n, free=policy.address_free_failures)
        assert elapsed >= wait * 0.9, (n, elapsed)
    # The real owner behind the same address still gets in, only a little later.
    status, elapsed = await attempt(EMAIL, PASSWORD)
    assert status == 303
    assert elapsed >= policy.delay_for(n + 1, free=policy.address_free_failures) * 0.9


async def test_members_see_but_cannot_change(
    client: AsyncTestClient,  # type: ignore[type-arg]
    settings: Settings,
    resources: Resources,
    test_env: dict[str, str],  # type: ignore[type-arg]
) -> None:
    await sign_up(client, EMAIL, workspace="Sunny Bakes")
    owner = (await client.get("/accounts")).text
    assert 'id="connect-instagram"' in owner

    async with resources.sessionmaker() as session, session.begin():
        workspace_id = (
            (await session.execute(WorkspaceMember.__table__.select().limit(1))).one().workspace_id
        )
        member = User(email="helper@example.com", password_hash=hash_password(PASSWORD))
        session.add(member)
        await session.flush()
        session.add(WorkspaceMember(workspace_id=workspace_id, user_id=member.id, role=Role.MEMBER))

    async with AsyncTestClient(create_app(settings)) as helper:
        assert (await _login(helper, "helper@example.com", PASSWORD)).status_code == 303
        accounts = await helper.get("/accounts")
        assert accounts.status_code == 200
        assert "Sunny Bakes" in accounts.text
        assert 'id="connect-instagram"' not in accounts.text
        assert (await helper.get("/campaigns")).status_code == 200
        new = await helper.get("/campaigns/new", headers={"accept": "text/html"})
        assert new.status_code == 403
        assert "lets you see everything but not change it" in new.text
        refused = await helper.post(
            "/accounts/connect", data=tokens(accounts.text, "/logout") | {"_idem": "k" * 32}
        )
        assert refused.status_code == 403
