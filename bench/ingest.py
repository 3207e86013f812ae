"""Webhook ingestion benchmark: signed POSTs into one web process, and one worker's fan-out.

    uv run python -m bench.ingest            # full run (about two minutes)
    uv run python -m bench.ingest --smoke    # seconds, for CI (exit status 1 on wrong answers)

Starts its own web process and, for the fan-out, worker processes against a scratch
PostgreSQL database and a reserved Redis db, seeds one account with three active campaigns,
and drives the web from this process with a lean keep-alive HTTP client. Prints one JSON
document:

- `ceiling`: the same server's `GET /webhooks/instagram` verification handshake, closed loop.
  No bench-only route ships in the product: the handshake is the cheapest path through the
  very route the events use (same server, same middleware, a token check, no body, no I/O),
  so `ratio_to_ceiling` is what storing a signed event costs relative to answering at all.
  `health_live` (`GET /health/live`, a Litestar handler that also sets a CSRF cookie) is
  reported beside it for context.
- `single_max`: one comment per POST, closed loop: events/s acknowledged with 200.
- `single_steady`: one comment per POST due at a steady 500 requests/s: p50/p99 latency,
  counted from when each request was due.
- `batch50_max`: 50 comments per POST, closed loop.
- `fanout_single`, `fanout_batch50`: after each load, one worker process (`ingest_event`
  only, concurrency `WORKER_CONCURRENCY`) ingests what it stored — parse, match, ledger and
  `dm_logs` rows, one delivery job per new row — while the web sits idle; comment events per
  second from the worker's first job start to its last job end.

Targets on 2 cores: single ≥ 2,000 events/s; p99 ≤ 15 ms at 500/s; batches ≥ 20,000 events/s;
fan-out ≥ 5,000 events/s per worker process.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import hashlib
import hmac
import json
import os
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import psycopg

from app.queue import Lane, lane_queue_name
from bench.http_load import LoadResult, closed_loop, open_loop, render_request
from tests.support.infra import TestDatabase, TestRedis, base_env
from tests.support.processes import Service, free_port, start_web, wait_until

ACCOUNT_IG_ID = "17841400000000001"
MEDIA_ID = "17900000000000001"
SECRET = b"test-instagram-app-secret"  # base_env's INSTAGRAM_APP_SECRET
INGEST_QUEUE = "bench-ingest"
# The web enqueues ingest jobs in the control lane of INGEST_QUEUE (app.queue.Lane).
INGEST_LANE = lane_queue_name(INGEST_QUEUE, Lane.CONTROL)
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


HANDSHAKE = render_request(
    "GET",
    "/webhooks/instagram?hub.mode=subscribe&hub.verify_token=test-verify-token&hub.challenge=42",
)
LIVE = render_request("GET", "/health/live")


async def single_phases(port: int, seconds: float, connections: int) -> dict[str, Any]:
    results: dict[str, Any] = {}
    # Warm up the routes (imports, connection pools, caches).
    await closed_loop(port, lambda _: (HANDSHAKE, 0), connections=4, duration_s=0.5)
    warmup = await closed_loop(port, webhook_factory(1, 90_000_000), connections=4, duration_s=0.5)
    results["warmup_events"] = warmup.events

    ceiling = await closed_loop(
        port, lambda _: (HANDSHAKE, 1), connections=connections, duration_s=seconds
    )
    results["ceiling"] = _summary(ceiling, "requests") | {
        "route": "GET /webhooks/instagram (verification handshake)"
    }
    health = await closed_loop(
        port, lambda _: (LIVE, 1), connections=connections, duration_s=seconds / 2
    )
    results["health_live"] = _summary(health, "requests")
    single = await closed_loop(
        port, webhook_factory(1, 0), connections=connections, duration_s=seconds
    )
    results["single_max"] = _summary(single, "events") | {
        # Rates, not counts: the two phases need not last exactly as long.
        "ratio_to_ceiling": round(single.requests_per_s / ceiling.requests_per_s, 3)
    }
    steady = await open_loop(
        port, webhook_factory(1, 10_000_000), rate=500, duration_s=seconds, connections=32
    )
    results["single_steady"] = _summary(steady, "events") | {"target_rate": 500}
    return results


async def batch_phase(
    port: int, seconds: float, connections: int, ceiling_rps: float
) -> dict[str, Any]:
    batch = await closed_loop(
        port, webhook_factory(50, 20_000_000), connections=connections, duration_s=seconds
    )
    return _summary(batch, "events") | {
        "request_ratio_to_ceiling": round(batch.requests_per_s / ceiling_rps, 3)
    }


def _summary(result: LoadResult, unit: str) -> dict[str, Any]:
    return result.summary() | {"unit": unit}


def counts(database_url: str) -> dict[str, int]:
    with psycopg.connect(database_url) as conn:
        return {
            "comments": int(_one(conn, "SELECT count(*) FROM comments")),
            "deliveries": int(_one(conn, "SELECT count(*) FROM dm_logs")),
            "events_waiting": int(
                _one(conn, "SELECT count(*) FROM webhook_events WHERE status <> 'processed'")
            ),
            "accounts_backlogged": int(
                _one(
                    conn,
                    "SELECT count(*) FROM instagram_accounts WHERE pr_backlog_since IS NOT NULL",
                )
            ),
        }


def job_count(redis_url: str, queue_name: str, kind: Literal["queued", "incomplete"]) -> int:
    """SAQ's own count of a queue's jobs: waiting now, or not yet finished."""
    from saq import Queue

    async def count() -> int:
        queue = Queue.from_url(redis_url, name=queue_name)
        try:
            return await queue.count(kind)
        finally:
            await queue.disconnect()

    return asyncio.run(count())


def fanout(env: dict[str, str], database_url: str, redis_url: str, log_dir: Path) -> dict[str, Any]:
    """One worker process ingests everything stored; what it did, how fast."""
    before = counts(database_url)
    worker = Service(
        "fanout-worker",
        ["-m", "bench.ingest", "--fanout-worker"],
        env,
        log_dir / f"fanout-worker-{time.time_ns()}.log",
    ).start()

    def drained() -> bool:
        if not worker.running:
            raise RuntimeError(f"the fan-out worker died:\n{worker.output()[-3000:]}")
        jobs_left = job_count(redis_url, INGEST_LANE, "incomplete")
        return jobs_left == 0 and counts(database_url)["events_waiting"] == 0

    try:
        wait_until(drained, timeout=900, interval=0.2, what="the fan-out")
    except TimeoutError:
        pass  # reported below as events still waiting
    finally:
        worker.stop()  # SIGTERM: the worker finishes, prints its timing and exits
    timing = _worker_report(worker)
    after = counts(database_url)
    delivery_jobs = job_count(redis_url, DELIVERY_QUEUE, "queued")
    ingest_left = job_count(redis_url, INGEST_LANE, "incomplete")
    comments = after["comments"] - before["comments"]
    seconds = timing["seconds"]
    return {
        "worker_processes": 1,
        "concurrency": int(env.get("WORKER_CONCURRENCY", "32")),
        "jobs": timing["jobs"],
        "comments": comments,
        "comments_per_s": round(comments / seconds, 1) if seconds else None,
        "seconds_first_job_to_last": round(seconds, 3),
        # CPU the worker process used per comment: steadier than wall time on a shared box.
        "cpu_us_per_comment": round(timing["cpu"] / comments * 1e6, 1) if comments else None,
        "deliveries_created": after["deliveries"] - before["deliveries"],
        "delivery_jobs_total": delivery_jobs,
        "events_waiting": after["events_waiting"],
        "ingest_jobs_left": ingest_left,
        "accounts_backlogged": after["accounts_backlogged"],
    }


def _worker_report(worker: Service) -> dict[str, Any]:
    if worker.process is None or worker.process.returncode != 0:
        raise RuntimeError(f"the fan-out worker failed:\n{worker.output()[-3000:]}")
    for line in reversed(worker.output().splitlines()):
        if line.startswith('{"fanout_worker"'):
            report: dict[str, Any] = json.loads(line)["fanout_worker"]
            return report
    raise RuntimeError(f"the fan-out worker printed no report:\n{worker.output()[-3000:]}")


async def run_fanout_worker() -> None:
    """The fan-out worker process: `ingest_event` only, until SIGTERM; then its timing."""
    from dataclasses import replace

    from saq import Worker

    from app.jobs.handlers import ingest_event
    from app.jobs.registry import JOB_OPTIONS
    from app.queue import open_queue
    from app.resources import Resources
    from app.settings import load_settings
    from worker.context import WorkerState

    settings = load_settings()
    # Delivery jobs go to a queue nothing consumes: this measures ingest, not sending.
    pool = min(settings.worker_concurrency, 20)
    ingest_settings = replace(settings, queue_name=DELIVERY_QUEUE)
    # As the worker process opens them (worker/runner.py): no pre-ping.
    resources = await Resources.open(
        ingest_settings, jobs=JOB_OPTIONS, db_pool_size=pool, db_pre_ping=False
    )
    state = WorkerState(worker_id="bench-fanout", resources=resources, started_at=time.time())
    span: dict[str, float] = {}
    jobs = 0

    async def startup(ctx: dict[str, Any]) -> None:
        ctx["state"] = state
        gc.freeze()  # as worker/runner.py does

    async def before_process(ctx: dict[str, Any]) -> None:
        if "first_start" not in span:
            span["first_start"], span["first_cpu"] = time.perf_counter(), time.process_time()

    async def after_process(ctx: dict[str, Any]) -> None:
        nonlocal jobs
        jobs += 1
        span["last_end"], span["last_cpu"] = time.perf_counter(), time.process_time()

    # Typed as worker/runner.py's DrainingWorker is: our jobs take a plain dict context.
    worker = Worker[Any](
        open_queue(settings, JOB_OPTIONS).of_lane(Lane.CONTROL),
        functions=[ingest_event],
        concurrency=settings.worker_concurrency,
        startup=startup,
        before_process=before_process,
        after_process=after_process,
    )
    try:
        await worker.start()
    finally:
        await resources.close()
    seconds = span.get("last_end", 0.0) - span.get("first_start", 0.0)
    cpu = span.get("last_cpu", 0.0) - span.get("first_cpu", 0.0)
    print(json.dumps({"fanout_worker": {"jobs": jobs, "seconds": seconds, "cpu": cpu}}), flush=True)


def problems_in(report: dict[str, Any]) -> list[str]:
    """What would make this run wrong rather than slow (the smoke run fails on any)."""
    found = [
        f"{phase}: answers other than 200: {report[phase]['statuses']}"
        for phase in ("ceiling", "health_live", "single_max", "single_steady", "batch50_max")
        if set(report[phase]["statuses"]) != {"200"}
    ]
    acknowledged = {
        "fanout_single": report["warmup_events"]
        + report["single_max"]["events"]
        + report["single_steady"]["events"],
        "fanout_batch50": report["batch50_max"]["events"],
    }
    for phase, expected in acknowledged.items():
        fan = report[phase]
        if fan["events_waiting"]:
            found.append(f"{phase}: {fan['events_waiting']} events were not processed")
        if fan["comments"] != expected:
            found.append(f"{phase}: {expected} comments acknowledged, {fan['comments']} stored")
        if fan["deliveries_created"] != fan["comments"]:
            found.append(f"{phase}: every comment matches, but not every one got a delivery")
    fans = (report["fanout_single"], report["fanout_batch50"])
    deliveries = sum(fan["deliveries_created"] for fan in fans)
    jobs = report["fanout_batch50"]["delivery_jobs_total"]
    if report["fanout_batch50"]["accounts_backlogged"]:
        # Past even the lifted hourly budget (the full size), ingest hands the rest of the
        # surge to the account's pacer: those rows have no job of their own, none has two.
        if jobs > deliveries:
            found.append("some new delivery got more than one job")
    elif jobs != deliveries:
        found.append("not every new delivery got exactly one job")
    return found


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

    # Process logs of this run, kept (and named in the report) only when something went wrong.
    log_dir = Path(tempfile.mkdtemp(prefix="oncereply-bench-ingest-"))
    database = TestDatabase.create()
    redis_db = TestRedis.reserve()
    web: Service | None = None
    report: dict[str, Any] = {}
    try:
        database.migrate()
        seed(database.url)
        env = base_env(database.url, redis_db.url) | {
            "LOG_LEVEL": "WARNING",
            "QUEUE_NAME": INGEST_QUEUE,
            # This measures ingest's own fan-out (one job per new delivery). At Meta's 750 an
            # hour, a run this size is a surge that ingest hands to the account's pacer
            # instead (bench/burst.py measures that): the budget is lifted out of the way.
            "PRIVATE_REPLIES_PER_HOUR": "100000",
        }
        port = free_port()
        web = start_web(env, port, log_dir)
        report = {
            "benchmark": "ingest",
            "mode": "smoke" if args.smoke else "full",
            "cpus": os.cpu_count(),
            "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        seconds = 1.0 if args.smoke else 8.0
        report |= asyncio.run(single_phases(port, seconds, args.connections))
        # The web stays up but idle while the worker runs.
        report["fanout_single"] = fanout(env, database.url, redis_db.url, log_dir)
        report["batch50_max"] = asyncio.run(
            batch_phase(
                port,
                seconds / 4 if args.smoke else seconds,
                max(1, args.connections // 2),
                report["ceiling"]["requests_per_s"],
            )
        )
        report["fanout_batch50"] = fanout(env, database.url, redis_db.url, log_dir)
        report["problems"] = problems_in(report)
        if report["problems"]:
            report["logs"] = str(log_dir)
        print(json.dumps(report, indent=2))
    finally:
        if web is not None:
            web.stop()
        database.drop()
        redis_db.release()
    if report.get("problems"):
        return 1
    shutil.rmtree(log_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
