"""Guessing a creator's password locks the guesser out, not the creator, and the creator is
told on the overview.

A real web process behind a "proxy" (the test, from 127.0.0.1, a trusted proxy) so each
request can come from its own client address (`X-Forwarded-For`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.auth.throttle import ThrottlePolicy
from tests.support.dashboard import PASSWORD, csrf_token, tokens
from tests.support.processes import Service, free_port, start_web

EMAIL = "sunny@example.com"


@pytest.fixture
def web(test_env: dict[str, str], artifacts_dir: Path) -> Iterator[str]:
    port = free_port()
    service: Service = start_web(test_env, port, artifacts_dir / "lockout")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        service.stop()


def _browser(base_url: str, address: str) -> httpx.Client:
    return httpx.Client(
        base_url=base_url, headers={"x-forwarded-for": address}, timeout=30, follow_redirects=False
    )


def _sign_in(browser: httpx.Client, password: str) -> httpx.Response:
    page = browser.get("/login")
    return browser.post(
        "/login",
        data={"_csrf_token": csrf_token(page.text), "email": EMAIL, "password": password},
    )


def test_the_guesser_is_locked_out_and_the_owner_is_not(web: str) -> None:
    policy = ThrottlePolicy()
    with _browser(web, "10.0.0.9") as owner:
        page = owner.get("/signup")
        made = owner.post(
            "/signup",
            data={**tokens(page.text, "/signup"), "email": EMAIL, "password": PASSWORD},
        )
        assert made.status_code == 303, made.text

    with _browser(web, "10.0.0.1") as guesser:
        answers = [_sign_in(guesser, f"guess {n}").status_code for n in range(policy.lock_after)]
        assert answers == [400] * policy.lock_after
        locked = _sign_in(guesser, "one more guess")
        assert locked.status_code == 429
        assert "Too many failed sign-in attempts" in locked.text
        # Locked for this email from this address, even with the right password.
        assert _sign_in(guesser, PASSWORD).status_code == 429

    with _browser(web, "10.0.0.2") as owner:
        signed_in = _sign_in(owner, PASSWORD)
        assert signed_in.status_code == 303, signed_in.text
        overview = owner.get("/", headers={"accept": "text/html"})
        assert overview.status_code == 200
        assert 'id="sign-in-attacked"' in overview.text
        assert f"wrong password {policy.lock_after} times" in overview.text


def test_no_notice_for_a_typo_or_two(web: str) -> None:
    with _browser(web, "10.0.0.9") as owner:
        page = owner.get("/signup")
        owner.post(
            "/signup",
            data={**tokens(page.text, "/signup"), "email": EMAIL, "password": PASSWORD},
        )
        owner.cookies.clear()
        assert _sign_in(owner, "a typo").status_code == 400
        assert _sign_in(owner, PASSWORD).status_code == 303
        overview = owner.get("/", headers={"accept": "text/html"})
        assert 'id="sign-in-attacked"' not in overview.text
