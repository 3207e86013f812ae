"""A process's resources close completely even when Redis has gone away first."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import time
from collections.abc import Iterator

import pytest
import redis

from app.jobs.registry import JOB_OPTIONS
from app.resources import Resources
from app.settings import Settings
from tests.support.processes import free_port, wait_until


@pytest.fixture
def own_redis() -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """A Redis server of this test's own, so the test can kill it."""
    port = free_port()
    server = subprocess.Popen(
        [shutil.which("redis-server") or "redis-server", "--port", str(port), "--save", ""],
        stdout=subprocess.DEVNULL,
    )

    def answers() -> bool:
        try:
            return bool(redis.Redis(port=port).ping())
        except redis.ConnectionError:
            return False

    wait_until(answers, timeout=10, what="the test's Redis")
    yield server, f"redis://127.0.0.1:{port}/0"
    server.kill()
    server.wait()


async def test_close_finishes_when_redis_is_gone(
    settings: Settings, own_redis: tuple[subprocess.Popen[bytes], str]
) -> None:
    server, url = own_redis
    resources = await Resources.open(dataclasses.replace(settings, redis_url=url), jobs=JOB_OPTIONS)
    await resources.redis.ping()
    async with resources.engine.connect() as conn:
        await conn.exec_driver_sql("SELECT 1")
    server.kill()
    server.wait()
    started = time.monotonic()
    await resources.close()  # must not raise, and must still let go of the database
    assert time.monotonic() - started < 10
    assert resources.engine.pool.checkedin() == 0  # type: ignore[attr-defined]
