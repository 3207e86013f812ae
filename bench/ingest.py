"""Webhook ingestion benchmark: signed POSTs into one web process, then the worker's fan-out.

    uv run python -m bench.ingest            # full run (about a minute and a half)
    uv run python -m bench.ingest --smoke    # a few seconds, for CI

Starts its own web process (and later a worker process) against a scratch PostgreSQL
database and a reserved Redis db, seeds one account with one active campaign, and drives it
from this process with a lean keep-alive HTTP client. Prints one JSON document:

- `ceiling`: the same server's `GET /health/live`, closed loop. No bench-only route is shipped
  in the product; `/health/live` is its cheapest existing route (no I/O, no body, same
  middleware stack and server), so the ratio to it shows what the webhook path itself costs.
- `single_max`: one comment per POST, closed loop: events/s acknowledged with 200.
- `single_steady`: one comment per POST at a steady 500 requests/s: p50/p99 latency.
- `batch50_max`: 50 comments per POST, closed loop.
- `fanout`: the web is stopped, then one worker process ingests every stored event (parse,
  match, ledger + dm_logs rows, delivery jobs); events per second from the first to the last
  commit, separately for the single-comment events and the 50-comment batches.

Targets on 2 cores: single ≥ 2,000 events/s; p99 ≤ 15 ms at 500/s; batches ≥ 20,000 events/s;
fan-out ≥ 5,000 events/s per worker process.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import json
import os
import sys
import time
from datetime import UTC, datetime
from typing import Any

import psycopg
import redis

from bench.http_load import LoadResult, closed_loop, open_loop, render_request
from tests.support.infra import TestDatabase, TestRedis, base_env
from tests.support.processes import ROOT, Service, free_port, start_web, wait_until

ACCOUNT_IG_ID = "17841400000000001"
MEDIA_ID = "17900000000000001"
SECRET = b"test-instagram-app-secret"  # base_env's INSTAGRAM_APP_SECRET
LOG_DIR = ROOT / "test-results" / "bench"
INGEST_QUEUE = "bench-ingest"
# The fan-out worker enqueues delivery jobs here, where nothing consumes them: the bench
# measures ingest, not sending.
DELIVERY_QUEUE = "bench-deliveries"


# A comment change as Meta sends it (non-ASCII escaped); doubled braces are literal.
_CHANGE = (
    '{{"field":"comments","value":{{"from":{{"id":"{fan}","username":"fan_{n}"}},'
    '"media":{{"id":"{media}","media_product_type":"REELS"}},"id":"{comment}",'
    '"text":"I want the GUIDE please \\u2764\\ufe0f"}}}}'
)
_ENVELOPE = (
    '{{"object":"instagram","entry":[{{"id":"{account}","time":{time},"changes":[{changes}]}}]}}'
)


def comment_body(first_id: int, count: int) -> bytes:
    changes = ",".join(
        _CHANGE.format(
            fan=25_000_000_000_000 + n, n=n, media=MEDIA_ID, comment=18_000_000_000_000_000 + n
        )
        for n in range(first_id, first_id + count)
    )
    return _ENVELOPE.format(account=ACCOUNT_IG_ID, time=int(time.time()), changes=changes).encode()


def signed_post(body: bytes) -> bytes:
    signature = "sha256=" + hmac.new(SECRET, body, hashlib.sha256).hexdigest()
    return render_request(
        "POST",
        "/webhooks/instagram",
        body,
        {"Content-Type": "application/json", "X-Hub-Signature-256": signature},
    )


def webhook_factory(items_per_post: int, offset: int) -> Any:
    def make(index: int) -> tuple[bytes, int]:
        return signed_post(
            comment_body(offset + index * items_per_post, items_per_post)
        ), items_per_post

    return make


def _one(conn: psycopg.Connection[Any], sql: str, params: tuple[Any, ...] = ()) -> Any:
    row = conn.execute(sql, params).fetchone()
    if row is None:
        raise RuntimeError(f"no row from {sql!r}")
    return row[0]


def seed(database_url: str) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        workspace = _one(conn, "INSERT INTO workspaces (name) VALUES ('bench') RETURNING id")
        account = _one(
            conn,
            "INSERT INTO instagram_accounts (workspace_id, ig_user_id, username) "
            "VALUES (%s, %s, 'bench_shop') RETURNING id",
            (workspace, ACCOUNT_IG_ID),
        )
        for name, scope, media, keywords in (
            ("Guide on the reel", "post", MEDIA_ID, ["guide", "pdf"]),
            ("Any post: link", "any_post", None, ["link", "guide"]),
            ("Any post: ebook", "any_post", None, ["ebook"]),
        ):
            conn.execute(
                "INSERT INTO campaigns (workspace_id, account_id, name, status, scope, media_id,"
                " keywords, match_mode, dm_text, activated_at, public_reply_enabled,"
                " public_replies) VALUES (%s, %s, %s, 'active', %s, %s, %s, 'whole_word',"
                " 'Here: {link}', now() - interval '1 day', true, ARRAY['Sent you a DM'])",
                (workspace, account, name, scope, media, keywords),
            )


async def load_phases(port: int, smoke: bool, connections: int) -> dict[str, Any]:
    seconds = 1.0 if smoke else 8.0
    handshake = render_request(
        "GET",
        "/webhooks/instagram?hub.mode=subscribe&hub.verify_token=test-verify-token&hub.challenge=42",
    )
    live = render_request("GET", "/health/live")
    results: dict[str, Any] = {}
    # Warm up the routes (imports, connection pools, caches).
    await closed_loop(port, lambda _: (handshake, 0), connections=4, duration_s=0.5)
    await closed_loop(port, webhook_factory(1, 90_000_000), connections=4, duration_s=0.5)

    ceiling = await closed_loop(
        port, lambda _: (handshake, 1), connections=connections, duration_s=seconds
    )
    results["ceiling"] = _with_rate(ceiling, "requests") | {
        "route": "GET /webhooks/instagram (verification handshake)"
    }
    health = await closed_loop(
        port, lambda _: (live, 1), connections=connections, duration_s=seconds / 2
    )
    results["health_live"] = _with_rate(health, "requests")
    single = await closed_loop(
        port, webhook_factory(1, 0), connections=connections, duration_s=seconds
    )
    results["single_max"] = _with_rate(single, "events")
    results["single_max"]["ratio_to_ceiling"] = round(single.requests / ceiling.requests, 3)
    steady = await open_loop(
        port, webhook_factory(1, 10_000_000), rate=500, duration_s=seconds, connections=32
    )
    results["single_steady"] = _with_rate(steady, "events") | {"target_rate": 500}
    batch = await closed_loop(
        port,
        webhook_factory(50, 20_000_000),
        connections=max(1, connections // 2),
        duration_s=seconds / 2 if smoke else seconds,
    )
    results["batch50_max"] = _with_rate(batch, "events")
    results["batch50_max"]["request_ratio_to_ceiling"] = round(batch.requests / ceiling.requests, 3)
    return results


def _with_rate(result: LoadResult, unit: str) -> dict[str, Any]:
    return result.summary() | {"unit": unit}


def fanout(env: dict[str, str], database_url: str, redis_url: str) -> dict[str, Any]:
    """Ingest every stored event with one worker process; rates from its commit times."""
    worker = Service(
        "fanout-worker",
        ["-m", "bench.ingest", "--fanout-worker"],
        env,
        LOG_DIR / f"fanout-worker-{time.time_ns()}.log",
    ).start()
    started = time.perf_counter()
    try:
        wait_until(lambda: not worker.running, timeout=600, interval=0.2, what="the fan-out")
    finally:
        worker.stop()
    if worker.process is None or worker.process.returncode != 0:
        raise RuntimeError(f"the fan-out worker failed:\n{worker.output()[-3000:]}")
    wall = time.perf_counter() - started
    with psycopg.connect(database_url) as conn:
        groups = conn.execute(
            "SELECT item_count, count(*), sum(item_count), "
            "extract(epoch FROM max(processed_at) - min(processed_at)) "
            "FROM webhook_events WHERE status = 'processed' GROUP BY item_count ORDER BY 1"
        ).fetchall()
        span = float(
            _one(
                conn,
                "SELECT coalesce(extract(epoch FROM max(processed_at) - min(processed_at)), 0) "
                "FROM webhook_events WHERE status = 'processed'",
            )
        )
        waiting = int(_one(conn, "SELECT count(*) FROM webhook_events WHERE status <> 'processed'"))
        comments = int(_one(conn, "SELECT count(*) FROM comments"))
        deliveries = int(_one(conn, "SELECT count(*) FROM dm_logs"))
    client = redis.Redis.from_url(redis_url)
    try:
        delivery_jobs = int(client.llen(f"saq:{DELIVERY_QUEUE}:queued"))  # type: ignore[arg-type]
    finally:
        client.close()
    by_size = {
        f"{int(size)}_per_event": {
            "events": int(events),
            "comments": int(items),
            "seconds": round(float(span), 3),
            "comments_per_s": round(int(items) / float(span), 1) if span else None,
        }
        for size, events, items, span in groups
    }
    return {
        "worker_processes": 1,
        "concurrency": int(env.get("WORKER_CONCURRENCY", "32")),
        "comments": comments,
        "comments_per_s": round(comments / span, 1) if span else None,
        "seconds_first_to_last_commit": round(span, 3),
        "seconds_wall_incl_start": round(wall, 3),
        "by_event_size": by_size,
        "deliveries_created": deliveries,
        "delivery_jobs_enqueued": delivery_jobs,
        "events_not_processed": waiting,
    }


async def run_fanout_worker() -> None:
    """The fan-out worker process: `ingest_event` only, until the queue is empty."""
    from dataclasses import replace

    from saq import Queue, Worker

    from app.resources import Resources
    from app.settings import load_settings
    from worker.context import WorkerState
    from worker.jobs import ingest_event

    settings = load_settings()
    # Delivery jobs go to a queue nothing consumes: this measures ingest, not sending.
    pool = min(settings.worker_concurrency, 20)
    ingest_settings = replace(settings, queue_name=DELIVERY_QUEUE)
    resources = await Resources.open(ingest_settings, db_pool_size=pool)
    state = WorkerState(worker_id="bench-fanout", resources=resources, started_at=time.time())

    async def startup(ctx: dict[str, Any]) -> None:
        ctx["state"] = state

    worker = Worker(
        Queue.from_url(settings.redis_url, name=settings.queue_name),
        functions=[ingest_event],
        concurrency=settings.worker_concurrency,
        startup=startup,
        burst=True,
        dequeue_timeout=1.0,
    )
    try:
        await worker.start()
    finally:
        await resources.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="a few seconds, for CI")
    parser.add_argument(
        "--connections", type=int, default=16, help="concurrent connections in closed-loop phases"
    )
    parser.add_argument("--fanout-worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()

    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    if args.fanout_worker:
        asyncio.run(run_fanout_worker())
        return 0

    database = TestDatabase.create()
    redis_db = TestRedis.reserve()
    web: Service | None = None
    try:
        database.migrate()
        seed(database.url)
        env = base_env(database.url, redis_db.url) | {
            "LOG_LEVEL": "WARNING",
            "QUEUE_NAME": INGEST_QUEUE,
        }
        port = free_port()
        web = start_web(env, port, LOG_DIR)
        report: dict[str, Any] = {
            "benchmark": "ingest",
            "mode": "smoke" if args.smoke else "full",
            "cpus": os.cpu_count(),
            "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        report |= asyncio.run(load_phases(port, args.smoke, args.connections))
        web.stop()
        web = None
        report["fanout"] = fanout(env, database.url, redis_db.url)
        print(json.dumps(report, indent=2))
    finally:
        if web is not None:
            web.stop()
        database.drop()
        redis_db.release()
    return 0


if __name__ == "__main__":
    sys.exit(main())
