"""`python -m app worker-health`: the worker container's health check, against real Redis."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

from redis.asyncio import Redis

from app.heartbeat import HEARTBEAT_STALE_S, HEARTBEAT_TTL_S, Heartbeat, write_heartbeat
from tests.support.processes import ROOT, run_cli, start_worker, wait_until

HOST = "worker-container-7f3a"


def _check(env: dict[str, str], host: str | None = HOST) -> subprocess.CompletedProcess[str]:
    return run_cli(env, "worker-health", *(["--host", host] if host else []))


async def _beat(redis_url: str, *, host: str, age_s: float) -> None:
    now = time.time()
    redis = Redis.from_url(redis_url)
    try:
        await write_heartbeat(
            redis,
            Heartbeat(
                worker_id=f"{host}:1:abcdef",
                pid=1,
                host=host,
                version="0.1.0",
                started_at=now - 600,
                beat_at=now - age_s,
                jobs_done=3,
                last_error=None,
            ),
        )
    finally:
        await redis.aclose()


async def test_healthy_only_with_a_fresh_beat_from_this_host(test_env: dict[str, str]) -> None:
    nothing = _check(test_env)
    assert nothing.returncode == 1
    assert f"no worker heartbeat from {HOST}" in nothing.stderr

    # Another container's worker does not make this one healthy.
    await _beat(test_env["REDIS_URL"], host="another-container", age_s=1)
    assert _check(test_env).returncode == 1

    # A live worker beats every few seconds; the check's own start-up can take longer than
    # that on a busy machine, so the beat goes on while it runs.
    async def keep_beating() -> None:
        while True:
            await _beat(test_env["REDIS_URL"], host=HOST, age_s=0)
            await asyncio.sleep(0.5)

    beating = asyncio.create_task(keep_beating())
    try:
        fresh = await asyncio.to_thread(_check, test_env)
    finally:
        beating.cancel()
    assert fresh.returncode == 0, fresh.stderr
    assert f"worker {HOST}:1:abcdef beat" in fresh.stdout


async def test_a_stale_beat_is_unhealthy_before_its_key_expires(test_env: dict[str, str]) -> None:
    await _beat(test_env["REDIS_URL"], host=HOST, age_s=(HEARTBEAT_STALE_S + HEARTBEAT_TTL_S) / 2)
    stale = _check(test_env)
    assert stale.returncode == 1
    assert "stale" in stale.stderr


def test_unreachable_redis_is_unhealthy_not_a_traceback(test_env: dict[str, str]) -> None:
    down = _check({**test_env, "REDIS_URL": "redis://127.0.0.1:9/0"})
    assert down.returncode == 1
    assert "cannot read worker heartbeats from Redis" in down.stderr
    assert "Traceback" not in down.stderr


def test_a_real_worker_on_this_host_passes_the_default_check(
    test_env: dict[str, str], artifacts_dir: Path
) -> None:
    assert _check(test_env, host=None).returncode == 1
    worker = start_worker(test_env, artifacts_dir, name="worker-health")
    try:
        wait_until(
            lambda: _check(test_env, host=None).returncode == 0,
            timeout=60,
            what="worker-health to see the worker's first beat",
        )
    finally:
        worker.kill()


def test_the_check_loads_neither_the_web_app_nor_the_database_layer() -> None:
    """It runs every 30 s in a busy worker's container under a timeout: importing the web
    app, the migrations and SQLAlchemy took seconds of CPU there."""
    heavy = ("app.asgi", "alembic", "sqlalchemy", "litestar", "uvicorn", "app.resources")
    probe = (
        "import sys, app.__main__; "
        f"print(','.join(name for name in {heavy!r} if name in sys.modules))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert loaded.stdout.strip() == ""
