"""Nothing a request carries can hold the event loop or make a huge answer.

Password hashing runs off the event loop (and sign-ups are throttled before it runs), and
every list and text a form sends is bounded before any work: a review froze the web process
with 20 concurrent sign-ups and with one request of 200,000 keyword chips.

The event-loop check reads the web process's own log of slow callbacks, each timed by the CPU
the loop's thread spent in it (`tests.support.debug_web`), and compares them with the CPU time
of one argon2 hash measured here: a hash on the loop stalls it about that long, once for every
sign-up; off the loop, nothing comes close (the check still tolerates one).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import httpx
from litestar.testing import AsyncTestClient

from app.asgi import FORM_MAX_BODY_BYTES, create_app
from app.auth.passwords import hash_password
from app.auth.throttle import SignupPolicy
from app.resources import Resources
from app.settings import Settings
from tests.support.dashboard import PASSWORD, csrf_token, error_for, tokens
from tests.support.log_data import signed_in_creator
from tests.support.loop_stalls import LogWatch, stalls_in, start_debug_web
from tests.support.processes import free_port

HTML = {"accept": "text/html"}


def _one_hash_s() -> float:
    """The CPU time of the cheapest of three argon2 hashes here and now."""
    times = []
    for _ in range(3):
        started = time.thread_time()
        hash_password(PASSWORD)
        times.append(time.thread_time() - started)
    return min(times)


async def _sign_up(client: Any, csrf: str, email: str) -> int:
    """A sign-up form sent (each with its own one-time key), whoever the browser is now."""
    answer = await client.post(
        "/signup",
        data={
            "_csrf_token": csrf,
            "_idem": str(uuid.uuid4()),
            "email": email,
            "password": PASSWORD,
        },
        follow_redirects=False,
    )
    status: int = answer.status_code
    return status


async def test_sign_ups_hash_passwords_off_the_event_loop(
    test_env: dict[str, str], artifacts_dir: Path
) -> None:
    """Concurrent sign-ups against a real web process: its event loop does not stall for as
    long as a hash takes, sign-up after sign-up (a hash on the loop would, for each)."""
    port = free_port()
    web = start_debug_web(test_env, port, artifacts_dir / "request-bounds")
    try:
        watch = LogWatch(str(web.log_path))
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
            csrf = csrf_token((await client.get("/signup")).text)
            watch.skip()
            statuses = await asyncio.gather(
                *(_sign_up(client, csrf, f"fan{i}@example.com") for i in range(4))
            )
        one_hash = _one_hash_s()
        stalls = stalls_in(watch.read(), at_least_s=one_hash * 0.9)
    finally:
        web.stop()
    assert statuses == [303] * 4
    assert len(stalls) <= 1, f"one hash takes {one_hash:.3f} s; the loop stalled: {stalls}"


async def test_sign_ups_are_throttled_per_address_and_per_email(settings: Settings) -> None:
    policy = SignupPolicy()
    async with AsyncTestClient(create_app(settings)) as client:
        csrf = csrf_token((await client.get("/signup")).text)
        # The same email again and again (it exists after the first): refused past the limit.
        same = [
            await _sign_up(client, csrf, "sunny@example.com") for _ in range(policy.per_email + 1)
        ]
        assert same[-1] == 429, same
        assert 303 in same
        # From one address, past its limit whatever the emails.
        others = [
            await _sign_up(client, csrf, f"fan{i}@example.com")
            for i in range(policy.per_address - policy.per_email)
        ]
        assert others[-1] == 429, others
        refused = await client.post(
            "/signup",
            data={
                "_csrf_token": csrf,
                "_idem": str(uuid.uuid4()),
                "email": "new@example.com",
                "password": PASSWORD,
            },
        )
        assert refused.status_code == 429
        assert "Too many sign-ups from here" in refused.text


async def test_a_password_past_its_bound_is_a_field_error(settings: Settings) -> None:
    async with AsyncTestClient(create_app(settings)) as client:
        page = await client.get("/signup")
        answer = await client.post(
            "/signup",
            data={
                **tokens(page.text, "/signup"),
                "email": "long@example.com",
                "password": "x" * 5000,
            },
        )
        assert answer.status_code == 422
        assert 'id="password-error">Use at most 1024 characters' in answer.text


async def _bounded(answer: Awaitable[Any], *, max_bytes: int) -> Any:
    response = await answer
    assert len(response.content) < max_bytes, f"{len(response.content)} bytes"
    return response


async def test_keyword_chips_are_bounded(settings: Settings, resources: Resources) -> None:
    many = [f"k{i}" for i in range(20_000)]
    async with signed_in_creator(settings, resources) as creator:
        page = await creator.client.get("/campaigns/new", headers=HTML)
        headers = {"x-csrftoken": csrf_token(page.text), "hx-request": "true"}
        chips = await _bounded(
            creator.client.post(
                "/campaigns/keywords", data={"field": "keywords", "keywords": many}, headers=headers
            ),
            max_bytes=20_000,
        )
        assert chips.status_code == 200
        assert "At most 10 keywords" in chips.text
        typed = await _bounded(
            creator.client.post(
                "/campaigns/keywords",
                data={"field": "keywords", "keywords_entry": ",".join(many) + "," + "x" * 50_000},
                headers=headers,
            ),
            max_bytes=20_000,
        )
        assert "At most 10 keywords" in typed.text


async def test_a_campaign_save_with_huge_lists_re_renders_bounded(
    settings: Settings, resources: Resources
) -> None:
    async with signed_in_creator(settings, resources) as creator:
        path = f"/campaigns/{creator.campaign_id}"
        page = await creator.client.get(path, headers=HTML)
        answer = await _bounded(
            creator.client.post(
                path,
                data={
                    **tokens(page.text, path),
                    "name": "Lemon loaf",
                    "account_id": str(creator.account_id),
                    "keywords": [f"k{i}" for i in range(20_000)],
                    "excluded_keywords_entry": ",".join(f"e{i}" for i in range(20_000)),
                    "public_replies": "\n".join(f"thanks {i}" for i in range(20_000)),
                    "dm_text": "Here it is " * 20_000,
                },
                headers=HTML,
            ),
            max_bytes=400_000,
        )
        assert answer.status_code == 422
        assert "At most 10 keywords" in (error_for(answer.text, "keywords") or "")
        assert "At most 10 excluded keywords" in (error_for(answer.text, "excluded_keywords") or "")
        assert "At most 10 reply variants" in (error_for(answer.text, "public_replies") or "")
        assert "Too long" in (error_for(answer.text, "dm_text") or "")


async def test_a_form_past_the_body_bound_is_refused(
    settings: Settings, resources: Resources
) -> None:
    async with signed_in_creator(settings, resources) as creator:
        page = await creator.client.get("/campaigns/new", headers=HTML)
        answer = await creator.client.post(
            "/campaigns/preview",
            data={"dm_text": "x" * (FORM_MAX_BODY_BYTES + 1)},
            headers={"x-csrftoken": csrf_token(page.text), "hx-request": "true"},
        )
        assert answer.status_code == 413
