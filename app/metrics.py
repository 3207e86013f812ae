"""`/metrics` for the web process: its own counters, and the shared state read at scrape time.

The counters (`app/instruments.py`) are this process's: what it received, refused, absorbed.
Queue depth, live workers, the delivery backlog and each account's hourly budget describe
state every process shares, so they are read from Redis and PostgreSQL when Prometheus
scrapes, by whichever web process it asks; every web process gives the same values, so a
dashboard should take `max` of them across instances, not `sum`. Workers expose only their
own counters (`worker_metrics` below), never these gauges.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from prometheus_client import REGISTRY, CollectorRegistry, generate_latest, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy import text

from app.delivery.send.budget import budget_key
from app.heartbeat import live_heartbeats
from app.resources import Resources

logger = logging.getLogger(__name__)

_SCRAPE_TIMEOUT_S = 3.0
# Legs waiting or in flight, by kind; both filters are partial indexes of dm_logs.
_BACKLOG = text(
    "SELECT trigger_kind, 'pending_due' AS state, count(*) FROM dm_logs "
    "WHERE pr_state = 'PENDING' AND (pr_next_attempt_at IS NULL OR pr_next_attempt_at <= now()) "
    "GROUP BY trigger_kind "
    "UNION ALL SELECT trigger_kind, 'pending_later', count(*) FROM dm_logs "
    "WHERE pr_state = 'PENDING' AND pr_next_attempt_at > now() GROUP BY trigger_kind "
    "UNION ALL SELECT trigger_kind, 'in_flight', count(*) FROM dm_logs "
    "WHERE pr_state = 'IN_FLIGHT' GROUP BY trigger_kind"
)
_ACCOUNTS = text(
    "SELECT id, username FROM instagram_accounts WHERE status = 'active' ORDER BY id LIMIT 1000"
)


@dataclass(slots=True)
class SharedState:
    """What a scrape reads from Redis and PostgreSQL; a part it could not read is left out."""

    # (lane, state) → jobs
    queue: dict[tuple[str, str], int] = field(default_factory=dict)
    workers: int | None = None
    backlog: list[tuple[str, str, int]] = field(default_factory=list)
    budget_used: list[tuple[str, str, int]] = field(default_factory=list)
    budget_limit: int = 0
    errors: list[str] = field(default_factory=list)


async def read_shared_state(resources: Resources) -> SharedState:
    state = SharedState(budget_limit=resources.settings.private_replies_per_hour)
    parts = {
        "queue": _queue(resources, state),
        "workers": _workers(resources, state),
        "backlog": _backlog(resources, state),
        "budget": _budget(resources, state),
    }
    results = await asyncio.gather(
        *(asyncio.wait_for(part, _SCRAPE_TIMEOUT_S) for part in parts.values()),
        return_exceptions=True,
    )
    for name, result in zip(parts, results, strict=True):
        if isinstance(result, BaseException):
            # The type only: a driver's message may quote a URL with its password.
            logger.warning("metrics: could not read %s: %s", name, type(result).__name__)
            state.errors.append(name)
    return state


async def _queue(resources: Resources, state: SharedState) -> None:
    for queue in resources.queue.lanes:
        queued, active, incomplete = (
            await queue.count("queued"),
            await queue.count("active"),
            await queue.count("incomplete"),
        )
        lane = queue.lane.value
        state.queue[(lane, "queued")] = queued
        state.queue[(lane, "active")] = active
        state.queue[(lane, "scheduled")] = max(0, incomplete - queued - active)


async def _workers(resources: Resources, state: SharedState) -> None:
    state.workers = len(await live_heartbeats(resources.redis, time.time()))


async def _backlog(resources: Resources, state: SharedState) -> None:
    async with resources.engine.connect() as conn:
        rows = (await conn.execute(_BACKLOG)).all()
    state.backlog = [(kind, leg_state, count) for kind, leg_state, count in rows]


async def _budget(resources: Resources, state: SharedState) -> None:
    async with resources.engine.connect() as conn:
        accounts = (await conn.execute(_ACCOUNTS)).all()
    if not accounts:
        return
    redis_time = await resources.redis.time()  # the budget's members are scored by Redis's clock
    now_ms = int(redis_time[0]) * 1000 + int(redis_time[1]) // 1000
    window_ms = int(resources.settings.private_reply_window_s * 1000)
    async with resources.redis.pipeline(transaction=False) as pipe:
        for account_id, _ in accounts:
            pipe.zcount(budget_key(account_id), now_ms - window_ms + 1, "+inf")
        used = await pipe.execute()
    state.budget_used = [
        (str(account_id), username or "", int(count))
        for (account_id, username), count in zip(accounts, used, strict=True)
    ]


class _SharedStateCollector(Collector):
    def __init__(self, state: SharedState) -> None:
        self.state = state

    def collect(self) -> Iterable[GaugeMetricFamily]:
        state = self.state
        queue = GaugeMetricFamily(
            "oncereply_queue_jobs",
            "Jobs on the queue by lane (work: deliveries; control: ingest, pacer, relays) "
            "and state, now",
            labels=["lane", "state"],
        )
        for (lane, name), count in state.queue.items():
            queue.add_metric([lane, name], count)
        yield queue
        if state.workers is not None:
            yield GaugeMetricFamily(
                "oncereply_workers_live", "Workers with a live heartbeat", value=state.workers
            )
        backlog = GaugeMetricFamily(
            "oncereply_backlog_legs",
            "Private-reply and DM legs waiting (due now or later) or in flight, by kind",
            labels=["kind", "state"],
        )
        for kind, leg_state, count in state.backlog:
            backlog.add_metric([kind, leg_state], count)
        yield backlog
        used = GaugeMetricFamily(
            "oncereply_budget_used",
            "Private replies reserved in the rolling window (Meta's hour), per account",
            labels=["account", "username"],
        )
        for account, username, count in state.budget_used:
            used.add_metric([account, username], count)
        yield used
        yield GaugeMetricFamily(
            "oncereply_budget_limit",
            "Private replies each account may send in the rolling window (Meta's hour)",
            value=state.budget_limit,
        )
        yield GaugeMetricFamily(
            "oncereply_metrics_read_errors",
            "Parts of the shared state this scrape could not read",
            value=len(state.errors),
        )


async def render_metrics(resources: Resources) -> bytes:
    """This process's counters, then the shared state: Prometheus's text format."""
    shared = CollectorRegistry(auto_describe=False)
    shared.register(_SharedStateCollector(await read_shared_state(resources)))
    return generate_latest(REGISTRY) + generate_latest(shared)


def worker_metrics(host: str, port: int) -> None:
    """Serve this worker's own counters on `host:port`, from a thread of prometheus-client."""
    start_http_server(port, addr=host)
