"""A worker process counts what it does on its own metrics port: deliveries by state and kind,
Meta's answers, send latency, and a duplicate delivery job blocked (also counted per account
in PostgreSQL for the overview)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import text

from app.db.models import LegState
from app.delivery.send.scheduling import enqueue_delivery
from app.queue import JobName, enqueue
from tests.integration.delivery.conftest import World
from tests.support.processes import free_port, start_worker, wait_until


def _samples(port: int) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    body = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(body)
        for sample in family.samples
    }


def _value(
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str
) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


async def _blocked_hits(world: World) -> int:
    async with world.resources.engine.connect() as conn:
        hits = await conn.scalar(
            text(
                "SELECT coalesce(sum(hits), 0) FROM idempotency_hits "
                "WHERE account_id = :account AND kind = 'send_blocked'"
            ),
            {"account": world.account_id},
        )
    return int(hits or 0)


async def test_a_worker_serves_its_own_counters(
    world: World, delivery_env: dict[str, str], artifacts_dir: Path
) -> None:
    port = free_port()
    worker = start_worker({**delivery_env, "WORKER_METRICS_PORT": str(port)}, artifacts_dir)
    try:
        row = await world.comment()
        await enqueue_delivery(world.resources.queue, row.id)
        deadline = time.monotonic() + 90
        while (await world.log(row.id)).pr_state is not LegState.SENT:
            assert worker.running, worker.output()[-3000:]
            assert time.monotonic() < deadline, "the comment was not delivered within 90 s"
            await asyncio.sleep(0.2)
        # The same comment's job again, as a redelivered webhook would enqueue it: blocked.
        await enqueue(world.resources.queue, JobName.PROCESS_COMMENT, key="again", dm_log_id=row.id)
        deadline = time.monotonic() + 90
        while await _blocked_hits(world) < 1:
            assert time.monotonic() < deadline, "the duplicate job was not counted within 90 s"
            await asyncio.sleep(0.2)
        # A final refusal: Meta's code and subcode are counted as they came.
        fan = await world.new_fan("metrics.fan")
        world.admin.add_fault("messages", "reject", code=551, times=1)
        refused = await world.comment(fan)
        await enqueue_delivery(world.resources.queue, refused.id)
        deadline = time.monotonic() + 90
        while (await world.log(refused.id)).pr_state is not LegState.FAILED:
            assert time.monotonic() < deadline, "the refused comment did not fail within 90 s"
            await asyncio.sleep(0.2)
        wait_until(
            lambda: (
                _value(_samples(port), "oncereply_idempotency_hits_total", scope="delivery.send")
                >= 1
            ),
            timeout=30,
            what="the worker's blocked-send counter",
        )
        samples = _samples(port)
    finally:
        worker.stop()
    assert (
        _value(samples, "oncereply_deliveries_total", kind="comment", leg="private", state="SENT")
        == 1
    )
    assert (
        _value(samples, "oncereply_meta_answers_total", endpoint="messages", code="ok", subcode="")
        == 1
    )
    assert _value(samples, "oncereply_send_seconds_count", endpoint="messages", outcome="sent") == 1
    assert _value(samples, "oncereply_idempotency_hits_total", scope="delivery.send") == 1
    failed = {"kind": "comment", "leg": "private", "state": "FAILED"}
    assert _value(samples, "oncereply_deliveries_total", **failed) == 1
    refusal = {"endpoint": "messages", "code": "551", "subcode": ""}
    assert _value(samples, "oncereply_meta_answers_total", **refusal) == 1
    rejected = {"endpoint": "messages", "outcome": "rejected"}
    assert _value(samples, "oncereply_send_seconds_count", **rejected) == 1
    assert await _blocked_hits(world) == 1
    assert len(world.inbox("jane.doe")) == 1
