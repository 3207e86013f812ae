"""A real worker process beats into Redis; /health and the badge follow it; SIGTERM withdraws it."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis

from app.heartbeat import HEARTBEAT_TTL_S
from app.resources import Resources
from tests.support.processes import Service, free_port, start_web, start_worker, wait_until


@pytest.fixture
def web(test_env: dict[str, str], artifacts_dir: Path) -> Iterator[int]:
    port = free_port()
    service = start_web(test_env, port, artifacts_dir)
    try:
        yield port
    finally:
        service.stop()


def _health(port: int) -> tuple[int, dict[str, object]]:
    response = httpx.get(f"http://127.0.0.1:{port}/health", timeout=5)
    return response.status_code, response.json()


def _heartbeat_keys(redis_url: str) -> list[bytes]:
    client = redis.Redis.from_url(redis_url)
    try:
        return list(client.scan_iter("oncereply:worker:heartbeat:*"))
    finally:
        client.close()


def test_health_is_503_without_a_worker_and_200_with_one(
    web: int, test_env: dict[str, str], artifacts_dir: Path
) -> None:
    status, body = _health(web)
    assert status == 503
    checks = body["checks"]
    assert isinstance(checks, dict)
    assert checks["database"]["ok"] is True
    assert checks["redis"]["ok"] is True
    assert checks["worker"]["ok"] is False

    worker = start_worker(test_env, artifacts_dir)
    try:
        wait_until(lambda: _health(web)[0] == 200, timeout=60, what="a healthy /health")
        status, body = _health(web)
        worker_check = body["checks"]["worker"]  # type: ignore[index]
        assert worker_check["workers"] == 1
        assert 0 <= worker_check["heartbeat_age_s"] < 30
        assert body["checks"]["queue"]["name"] == "delivery"  # type: ignore[index]
        # Loopback gets the details above; a stranger a local proxy forwards, the status only.
        stranger = httpx.get(
            f"http://127.0.0.1:{web}/health", headers={"x-forwarded-for": "203.0.113.9"}, timeout=5
        )
        assert (stranger.status_code, stranger.json()) == (200, {"status": "ok"})
        badge = httpx.get(f"http://127.0.0.1:{web}/status/badge", timeout=5).text
        assert 'data-state="healthy"' in badge

        started = time.monotonic()
        worker.signal(signal.SIGTERM)
        wait_until(lambda: _health(web)[0] == 503, timeout=10, what="/health to notice the stop")
        assert time.monotonic() - started < 10
        badge = httpx.get(f"http://127.0.0.1:{web}/status/badge", timeout=5).text
        assert 'data-state="down"' in badge
        assert worker.process is not None
        assert worker.process.wait(timeout=40) == 0  # a clean exit after the one SIGTERM
    finally:
        worker.kill()


def test_heartbeat_carries_identity_and_expires_after_sigkill(
    test_env: dict[str, str], artifacts_dir: Path
) -> None:
    worker = start_worker(test_env, artifacts_dir)
    try:
        wait_until(
            lambda: bool(_heartbeat_keys(test_env["REDIS_URL"])), timeout=60, what="a heartbeat"
        )
        client = redis.Redis.from_url(test_env["REDIS_URL"])
        (key,) = _heartbeat_keys(test_env["REDIS_URL"])
        beat = json.loads(client.get(key) or b"{}")
        assert beat["pid"] == worker.process.pid  # type: ignore[union-attr]
        assert beat["host"]
        assert beat["version"]
        assert beat["started_at"] <= beat["beat_at"]
        assert beat["jobs_done"] == 0

        worker.kill()  # SIGKILL: no shutdown hook runs, the key must expire by itself
        ttl = client.ttl(key)
        # /health turns 503 once the key is gone: within the TTL, so well inside 150 s.
        assert 0 < ttl <= HEARTBEAT_TTL_S
        client.close()
    finally:
        worker.kill()


def test_health_reports_a_dead_database_quickly(
    test_env: dict[str, str], artifacts_dir: Path
) -> None:
    env = {**test_env, "DATABASE_URL": f"postgresql://postgres@127.0.0.1:{free_port()}/nowhere"}
    port = free_port()
    service: Service = start_web(env, port, artifacts_dir)
    try:
        started = time.monotonic()
        status, body = _health(port)
        assert time.monotonic() - started < 5
        assert status == 503
        assert body["checks"]["database"]["ok"] is False  # type: ignore[index]
        assert body["checks"]["redis"]["ok"] is True  # type: ignore[index]
    finally:
        service.stop()


async def test_enqueued_job_runs_in_the_worker_and_purges_expired_keys(
    resources: Resources, test_env: dict[str, str], artifacts_dir: Path
) -> None:
    from sqlalchemy import text

    from app.queue import JobName, enqueue

    async with resources.engine.begin() as conn:
        await conn.execute(
            text(
                "INSERT INTO idempotency_keys (key, scope, fingerprint, expires_at) VALUES "
                "('old', 'test', 'f', now() - interval '1 hour'), "
                "('new', 'test', 'f', now() + interval '1 hour')"
            )
        )
        # Hourly counts of repeats: a week is kept, older ones go.
        await conn.execute(
            text(
                "WITH w AS (INSERT INTO workspaces (name) VALUES ('purge') RETURNING id) "
                "INSERT INTO idempotency_hits (workspace_id, kind, hour, hits) "
                "SELECT id, 'button_repeat', now() - interval '8 days', 1 FROM w UNION ALL "
                "SELECT id, 'button_repeat', now() - interval '6 days', 1 FROM w"
            )
        )
    worker = start_worker(test_env, artifacts_dir)
    try:
        job = await enqueue(resources.queue, JobName.PURGE_EXPIRED)
        assert job is not None
        await job.refresh(until_complete=60)
        assert job.status == "complete", job.error
        assert job.result == {
            "idempotency_keys": 1,
            "webhook_events": 0,
            "idempotency_hits": 1,
            "link_click_day_people": 0,
            "link_click_days": 0,
            "link_click_quarters": 0,
        }
        async with resources.engine.connect() as conn:
            left = (await conn.execute(text("SELECT key FROM idempotency_keys"))).scalars().all()
        assert left == ["new"]
    finally:
        worker.stop(timeout=40)
