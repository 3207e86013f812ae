"""The header badge's three states from what the worker leaves in Redis: a fresh heartbeat is
healthy, a late one (or a backlog nothing drains) is stale, none is down. Visitors see the
state only; what is wrong is for signed-in users. Neither the badge nor /health shows a
secret of the deployment (a DSN's password) when a dependency refuses.

Heartbeats are written with the worker's own `write_heartbeat`, at chosen ages, into the
run's Redis; the badge is read through the real app.
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from app.asgi import create_app
from app.health import STUCK_QUEUE_DEPTH, _probe
from app.heartbeat import HEARTBEAT_STALE_S, HEARTBEAT_TTL_S, Heartbeat, write_heartbeat
from app.queue import JobName, enqueue
from app.resources import Resources
from app.settings import Settings, load_settings
from tests.support.dashboard import sign_up
from tests.support.processes import free_port

# Late enough to be stale, not so late that the beat has expired.
LATE_S = (HEARTBEAT_STALE_S + HEARTBEAT_TTL_S) / 2


@pytest.fixture
async def client(settings: Settings, test_env: dict[str, str]) -> AsyncIterator[AsyncTestClient]:  # type: ignore[type-arg]
    async with AsyncTestClient(create_app(settings)) as test_client:
        yield test_client


async def _beat(resources: Resources, age_s: float) -> None:
    now = time.time()
    await write_heartbeat(
        resources.redis,
        Heartbeat(
            worker_id="test-host:4242:abcdef",
            pid=4242,
            host="test-host",
            version="test",
            started_at=now - 600,
            beat_at=now - age_s,
            jobs_done=7,
            last_error=None,
        ),
    )


async def _badge(client: AsyncTestClient) -> tuple[str, str]:  # type: ignore[type-arg]
    """The badge's state and its title (the hover text)."""
    badge = await client.get("/status/badge")
    assert badge.status_code == 200
    match = re.search(r'data-state="(\w+)" title="([^"]*)"', badge.text)
    assert match, badge.text
    return match.group(1), match.group(2)


async def _state(client: AsyncTestClient) -> str:  # type: ignore[type-arg]
    return (await _badge(client))[0]


async def test_a_late_heartbeat_makes_the_badge_stale(
    client: AsyncTestClient,  # type: ignore[type-arg]
    resources: Resources,
) -> None:
    assert await _state(client) == "down"  # no worker has ever beaten
    await _beat(resources, age_s=1)
    assert await _state(client) == "healthy"
    # Missed two beats but the key has not expired: the worker may be wedged.
    await _beat(resources, age_s=LATE_S)
    assert await _state(client) == "stale"


async def test_a_backlog_no_one_drains_makes_the_badge_stale(
    client: AsyncTestClient,  # type: ignore[type-arg]
    resources: Resources,
) -> None:
    for n in range(STUCK_QUEUE_DEPTH - 1):
        await enqueue(resources.queue, JobName.PURGE_EXPIRED, key=f"stuck-{n}")
    # A worker that beats but runs nothing; beaten again just before each look, as a live
    # worker would, so a slow machine's enqueues cannot age the beat past stale.
    await _beat(resources, age_s=0)
    assert await _state(client) == "healthy"  # a backlog, but not yet a stuck one
    await enqueue(resources.queue, JobName.PURGE_EXPIRED, key="stuck-last")
    await _beat(resources, age_s=0)
    assert await _state(client) == "stale"


async def test_visitors_see_the_state_and_signed_in_users_see_what_is_wrong(
    client: AsyncTestClient,  # type: ignore[type-arg]
    resources: Resources,
) -> None:
    # The sign-in page polls the badge too: a visitor learns that something is down, not what.
    state, title = await _badge(client)
    assert state == "down"
    assert title == "Something is not running; sign in for details"
    stranger = (await client.get("/status/badge")).text
    assert "waiting" not in stranger  # no queue to strangers
    assert "queued" not in stranger
    await sign_up(client, "sunny@example.com")
    assert re.search(r"· \d+ jobs? queued</span>", (await client.get("/status/badge")).text)
    state, title = await _badge(client)
    assert state == "down"
    assert title == f"no worker heartbeat in the last {HEARTBEAT_TTL_S} s"
    await _beat(resources, age_s=LATE_S)
    assert await _badge(client) == ("stale", "worker heartbeat is late")
    client.cookies.clear()
    assert await _badge(client) == (
        "stale",
        "Deliveries are running late; sign in for details",
    )


async def test_health_gives_a_stranger_the_status_only_and_a_signed_in_user_the_checks(
    client: AsyncTestClient,  # type: ignore[type-arg]
    resources: Resources,
) -> None:
    # The in-process client's address is not loopback: to /health it is a stranger.
    await _beat(resources, 0)
    stranger = await client.get("/health")
    assert stranger.json() == {"status": stranger.json()["status"]}
    for detail in ("test-host", "delivery", "heartbeat_age_s", "latency", "checks"):
        assert detail not in stranger.text
    await sign_up(client, "sunny@example.com")
    member = await client.get("/health")
    assert member.status_code == stranger.status_code
    checks = member.json()["checks"]
    assert checks["queue"]["name"] == "delivery"
    assert checks["worker"]["workers"] == 1


async def test_no_secret_reaches_health_or_the_badge_when_the_database_refuses(
    test_env: dict[str, str],
) -> None:
    # A database nobody listens on, behind a DSN with a password: /health says it is down,
    # by the exception's type, and echoes neither the DSN nor the password.
    password = "db-pass-s3cret"
    dsn = f"postgresql://oncereply:{password}@127.0.0.1:{free_port()}/nowhere"
    settings = load_settings({**test_env, "DATABASE_URL": dsn})
    async with AsyncTestClient(create_app(settings)) as visitor:
        health = await visitor.get("/health")
        badge = await visitor.get("/status/badge")
    assert health.status_code == 503
    # A visitor (not on this machine's loopback, not signed in) gets the status alone, even
    # with the database down; what failed and how is for operators.
    assert health.json() == {"status": "degraded"}
    assert 'data-state="down"' in badge.text
    for answer in (health.text, badge.text):
        for secret in (password, "nowhere", settings.secret_key, test_env["REDIS_URL"]):
            assert secret not in answer


async def test_a_failing_probe_reports_the_error_type_and_never_its_message() -> None:
    # Driver messages quote the URL they failed on, password included (a Redis URL in a
    # ConnectionError, a DSN in an OperationalError).
    async def failing() -> dict[str, Any]:
        raise ConnectionError("Error connecting to redis://:redis-pass-s3cret@10.0.0.5:6379/0")

    result = await _probe(failing())
    assert result["ok"] is False
    assert result["error"] == "ConnectionError"
    assert "s3cret" not in repr(result)


async def test_while_no_worker_runs_every_page_gets_a_banner_that_nothing_is_lost(
    client: AsyncTestClient,  # type: ignore[type-arg]
    resources: Resources,
) -> None:
    # Visitors are not told: the banner is for the people whose DMs wait.
    assert "data-banner" not in (await client.get("/status/badge")).text
    await sign_up(client, "sunny@example.com")
    for path in ("/", "/campaigns", "/accounts", "/log", "/team"):
        page = await client.get(path)
        assert page.status_code == 200, path
        assert '<div id="worker-banner"></div>' in page.text, path  # the slot the badge fills
    badge = (await client.get("/status/badge")).text
    banner = re.search(r'<div id="worker-banner" hx-swap-oob="true">(.*?)</div>', badge, re.S)
    assert banner, badge
    assert 'data-banner="no-worker"' in banner.group(1)
    assert "comments are being stored" in banner.group(1)
    assert "DMs wait" in banner.group(1)

    await _beat(resources, age_s=1)
    badge = (await client.get("/status/badge")).text
    banner = re.search(r'<div id="worker-banner" hx-swap-oob="true">(.*?)</div>', badge, re.S)
    assert banner, badge
    assert banner.group(1).strip() == ""  # a worker is back: the banner goes away
