"""`/metrics` on the web process: refused without its token (or, without one, from anywhere
but loopback); the shared state read at scrape time (queue, backlog, budget, workers); and
the web's own webhook counters, counted in the process that answered."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import httpx
from litestar.testing import AsyncTestClient
from prometheus_client.parser import text_string_to_metric_families

from app.asgi import create_app
from app.delivery.send.budget import HourlyBudget
from app.queue import JobName, enqueue
from app.settings import Settings
from tests.integration.delivery.conftest import World
from tests.support.processes import free_port, start_web

TOKEN = "metrics-token-0123456789"
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def _samples(body: str) -> Samples:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(body)
        for sample in family.samples
    }


def _value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


async def test_metrics_need_the_token_and_read_the_shared_state(
    world: World, delivery_settings: Settings
) -> None:
    settings = dataclasses.replace(delivery_settings, metrics_token=TOKEN)
    await world.comment()  # one PENDING private reply, due now
    for n in range(3):
        await enqueue(world.resources.queue, JobName.PURGE_EXPIRED, key=f"metrics-{n}")
    await enqueue(world.resources.queue, JobName.INGEST_EVENT, key="metrics-ingest")
    budget = HourlyBudget(world.resources.redis, limit=settings.private_replies_per_hour)
    for _ in range(2):
        await budget.reserve(world.account_id)

    async with AsyncTestClient(create_app(settings)) as client:
        assert (await client.get("/metrics")).status_code == 401
        wrong = await client.get("/metrics", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
        assert wrong.headers["www-authenticate"] == 'Bearer realm="metrics"'
        assert "METRICS_TOKEN" in wrong.json()["detail"]
        answer = await client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain")
    samples = _samples(answer.text)
    assert _value(samples, "oncereply_queue_jobs", lane="work", state="queued") == 3
    assert _value(samples, "oncereply_queue_jobs", lane="control", state="queued") == 1
    assert _value(samples, "oncereply_workers_live") == 0
    assert _value(samples, "oncereply_backlog_legs", kind="comment", state="pending_due") == 1
    used = {"account": str(world.account_id), "username": "sunny.bakes"}
    assert _value(samples, "oncereply_budget_used", **used) == 2
    assert _value(samples, "oncereply_budget_limit") == settings.private_replies_per_hour
    assert _value(samples, "oncereply_metrics_read_errors") == 0

    # Without a token, a client that is not on loopback is refused.
    async with AsyncTestClient(create_app(delivery_settings)) as client:
        refused = await client.get("/metrics", headers={"accept": "text/html"})
        assert refused.status_code == 403
        assert refused.headers["content-type"].startswith("text/html")
        assert "this machine only" in refused.text


def test_a_web_process_counts_the_webhooks_it_answers(
    delivery_env: dict[str, str], artifacts_dir: Path
) -> None:
    port = free_port()
    web = start_web(delivery_env, port, artifacts_dir)
    try:
        url = f"http://127.0.0.1:{port}"
        before = _samples(httpx.get(f"{url}/metrics", timeout=10).text)  # loopback: no token
        refused = httpx.post(
            f"{url}/webhooks/instagram",
            content=b'{"object": "instagram", "entry": []}',
            headers={"X-Hub-Signature-256": "sha256=" + "0" * 64},
            timeout=10,
        )
        assert refused.status_code == 401
        after = _samples(httpx.get(f"{url}/metrics", timeout=10).text)
    finally:
        web.stop()
    refusals = "oncereply_webhook_events_total"
    assert (_value(after, refusals, result="refused") or 0) - (
        _value(before, refusals, result="refused") or 0
    ) == 1
