"""Security headers on every answer: pages, errors, static files, the webhook; HSTS only
under https; invite pages keep their stricter referrer policy."""

from __future__ import annotations

import pytest
from litestar.testing import AsyncTestClient

from app.asgi import create_app
from app.settings import Settings, load_settings
from tests.support.dashboard import sign_up

EXPECTED = {
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
}


def _policy(header: str) -> dict[str, str]:
    policy: dict[str, str] = {}
    for part in header.split(";"):
        name, _, value = part.strip().partition(" ")
        policy[name] = value
    return policy


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/login"),
        ("GET", "/signup"),
        ("GET", "/no/such/page"),
        ("GET", "/static/app.css"),
        ("GET", "/health/live"),
        ("POST", "/webhooks/instagram"),
        ("POST", "/login"),
    ],
)
async def test_every_answer_has_the_headers(settings: Settings, method: str, path: str) -> None:
    async with AsyncTestClient(create_app(settings)) as client:
        answer = await client.request(method, path, headers={"accept": "text/html"})
    for name, value in EXPECTED.items():
        assert answer.headers.get(name) == value, (path, name)
    assert answer.headers.get("referrer-policy") == "same-origin"
    policy = _policy(answer.headers["content-security-policy"])
    assert policy["frame-ancestors"] == "'none'"
    assert policy["script-src"] == "'self'"
    assert policy["style-src"] == "'self'"
    assert policy["object-src"] == "'none'"
    assert "unsafe" not in answer.headers["content-security-policy"]
    assert "strict-transport-security" not in answer.headers  # plain http in tests


async def test_signed_in_pages_cannot_be_framed(settings: Settings) -> None:
    async with AsyncTestClient(create_app(settings)) as client:
        await sign_up(client, "sunny@example.com")
        editor = await client.get("/campaigns/new", headers={"accept": "text/html"})
    assert editor.status_code == 200
    assert editor.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in editor.headers["content-security-policy"]


async def test_hsts_under_https(test_env: dict[str, str]) -> None:
    secure = load_settings({**test_env, "PUBLIC_BASE_URL": "https://oncereply.example"})
    async with AsyncTestClient(create_app(secure), base_url="https://testserver.local") as client:
        answer = await client.get("/login")
    assert answer.headers["strict-transport-security"].startswith("max-age=31536000")


async def test_invite_pages_keep_no_referrer(settings: Settings) -> None:
    async with AsyncTestClient(create_app(settings)) as client:
        answer = await client.get("/invite/not-a-real-token", headers={"accept": "text/html"})
    assert answer.headers["referrer-policy"] == "no-referrer"
    assert answer.headers["x-content-type-options"] == "nosniff"
