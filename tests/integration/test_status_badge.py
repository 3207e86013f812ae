"""The header badge's three states from what the worker leaves in Redis: a fresh heartbeat is
healthy, a late one (or a backlog nothing drains) is stale, none is down.

Heartbeats are written with the worker's own `write_heartbeat`, at chosen ages, into the
run's Redis; the badge is read through the real app.
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator

import pytest
from litestar.testing import AsyncTestClient

from app.asgi import create_app
from app.health import STUCK_QUEUE_DEPTH
from app.heartbeat import HEARTBEAT_STALE_S, HEARTBEAT_TTL_S, Heartbeat, write_heartbeat
from app.queue import enqueue
from app.resources import Resources
from app.settings import Settings


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


async def _state(client: AsyncTestClient) -> str:  # type: ignore[type-arg]
    badge = await client.get("/status/badge")
    assert badge.status_code == 200
    match = re.search(r'data-state="(\w+)"', badge.text)
    assert match, badge.text
    return match.group(1)


async def test_a_late_heartbeat_makes_the_badge_stale(
    client: AsyncTestClient,  # type: ignore[type-arg]
    resources: Resources,
) -> None:
    assert await _state(client) == "down"  # no worker has ever beaten
    await _beat(resources, age_s=1)
    assert await _state(client) == "healthy"
    # Missed two beats but the key has not expired: the worker may be wedged.
    assert HEARTBEAT_STALE_S < 90 < HEARTBEAT_TTL_S
    await _beat(resources, age_s=90)
    assert await _state(client) == "stale"


async def test_a_backlog_no_one_drains_makes_the_badge_stale(
    client: AsyncTestClient,  # type: ignore[type-arg]
    resources: Resources,
) -> None:
    await _beat(resources, age_s=1)  # fresh: a worker that beats but runs nothing
    for n in range(STUCK_QUEUE_DEPTH - 1):
        await enqueue(resources.queue, "purge_expired", key=f"stuck-{n}")
    assert await _state(client) == "healthy"  # a backlog, but not yet a stuck one
    await enqueue(resources.queue, "purge_expired", key="stuck-last")
    assert await _state(client) == "stale"
