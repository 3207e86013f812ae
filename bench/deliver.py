"""Delivery benchmark: N stored comments through ONE worker process against the sandbox.

    uv run python -m bench.deliver            # 5,000 comments
    uv run python -m bench.deliver --smoke    # 300 comments, a few seconds

Sets up a scratch PostgreSQL database, a reserved Redis db and a sandbox subprocess with no
added latency (its own rate limits lifted), stores one account, one campaign (once per person,
the default, so every claim also claims the person) and N `dm_logs` rows as ingestion would,
one per comment of N distinct fans, enqueues N `process_comment` jobs, then starts one worker
process and waits until every row is SENT. Prints one JSON document:

- `deliveries_per_s`: N divided by the time from the first claim to the last recorded send
  (both stamped by PostgreSQL, so worker start-up is not counted);
- `worker_cpu_ms_per_delivery`: the worker process's CPU time per delivery, a figure that
  does not move with what else the machine runs (the sandbox and PostgreSQL share its cores);
- `cpu_ms_per_delivery`: the same for every process a delivery costs, read from /proc
  (`bench/process_cpu.py`) from the worker's start to the last send: `worker` (as above),
  `postgres` (the backends on the bench's database), `sandbox`, and two shared figures that
  also count other people's work on the machine, `postgres_shared` (the server's WAL writer,
  background writer and checkpointer) and `redis` (the whole server). The worker, PostgreSQL,
  Redis and the sandbox all run on the same cores: `deliveries_per_s` is bounded by the
  `total`, not by the worker alone, and the sandbox's share is a cost Meta would carry,
  not us;
- `sql`: counted inside the worker process (this module's `--worker-process` mode counts
  psycopg's cursor executions and installs SQLAlchemy listeners, with the crons off so only
  deliveries are counted): statements per delivery, connections opened, pool checkouts (each
  one a pre-ping round trip), BEGIN/COMMIT/ROLLBACK on non-autocommit connections, their sum
  as database round trips per delivery, and the server's own transaction count from
  `pg_stat_database` as a cross-check;
- `redis`: counted inside the worker process too, at redis-py's connection: round trips (one
  per command, or per pipeline) and commands per delivery, SAQ's and the heartbeat's
  included, with the commands by name (a script named by its first key's prefix).

Then, unless `--skip-latency`, `webhook_to_send`: the whole path at a steady rate. The sandbox
is registered with a real web process as its webhook callback; fans comment at `--rate` per
second (50 by default) for `--seconds`; the sandbox sends signed webhooks, the web stores
them, one worker process ingests and delivers; each comment is by a fan of its own. For each
comment: from the web storing the webhook to the worker issuing the send, both stamped by
PostgreSQL's clock. The start is `webhook_events.received_at`, PostgreSQL's now() in the web
intake's INSERT of the event: the time before it (the request being read, its signature
checked, and waiting for the intake's insert in progress, one round trip at most) is not
counted; nor is Meta's own delay. The end is the first `delivery_attempts.started_at`,
written by the claim statement just before the call. Reports p50/p95/p99/max in milliseconds,
and the same up to the ledger and `dm_logs` rows being written (`ms_to_ingested`), to tell
ingest from delivery. A comment the worker's first reconciler sweep read before its webhook
arrived has no webhook to measure from: it is counted in `seen_first_by_poll` instead.

Targets: ≥ 250 deliveries/s per worker process; ≤ 4 database round trips per delivery;
webhook received → send issued p95 ≤ 100 ms at 50 comments/s.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

from bench.http_load import percentile_ms
from bench.process_cpu import OBSERVER, CpuSplit
from bench.redis_calls import count_redis, redis_figures
from bench.seeding import connected_account
from tests.support.dashboard import sandbox_env, web_env_for
from tests.support.infra import TestDatabase, TestRedis, base_env
from tests.support.processes import (
    Service,
    free_port,
    start_web,
    start_worker,
    wait_until,
    worker_beating,
)
from tests.support.sandbox_process import start_sandbox

LOG_DIR = Path(tempfile.gettempdir()) / "oncereply-bench"
QUEUE = "bench-deliver"
ACCOUNT = "sunny.bakes"
ACCOUNT_IG_ID = "17841458120395731"
MEDIA_ID = "17918195224117851"
# What the latency figures measure, as the JSON says it.
LATENCY_FROM = (
    "webhook_events.received_at: PostgreSQL's now() in the web intake's INSERT of the event, "
    "after the request was read and its signature checked (not the request's arrival)"
)
LATENCY_TO = "the first delivery_attempts.started_at: the claim statement, just before the send"


def seed(database_url: str, token: str, encryption_key: str) -> tuple[int, int, int]:
    with psycopg.connect(database_url, autocommit=True) as conn:
        workspace, account = connected_account(
            conn,
            workspace_name="bench",
            ig_user_id=ACCOUNT_IG_ID,
            username=ACCOUNT,
            token=token,
            encryption_key=encryption_key,
        )
        # Once per person, as a campaign is by default: the claim takes the person too.
        campaign = conn.execute(
            "INSERT INTO campaigns (workspace_id, account_id, name, status, scope, keywords, "
            "dm_text, once_per_person) VALUES (%s, %s, 'bench', 'active', 'any_post', "
            "'{recipe}', 'Hi {username}! The recipe: {link}', true) RETURNING id",
            (workspace, account),
        ).fetchone()
    if campaign is None:
        raise RuntimeError("seeding the bench database failed")
    return workspace, account, int(campaign[0])


def store_comments(
    database_url: str, ids: tuple[int, int, int], comments: list[dict[str, Any]]
) -> list[int]:
    workspace, account, campaign = ids
    deadline = datetime.now(UTC) + timedelta(days=7)
    with psycopg.connect(database_url, autocommit=True) as conn, conn.cursor() as cur:
        rows = [
            (
                workspace,
                account,
                campaign,
                c["id"],
                c["from"]["id"],
                c["from"]["username"],
                c["text"],
                MEDIA_ID,
                deadline,
            )
            for c in comments
        ]
        cur.executemany(
            "INSERT INTO dm_logs (workspace_id, account_id, campaign_id, campaign_version, "
            "trigger_kind, trigger_id, recipient_id, recipient_username, trigger_text, "
            "media_id, deadline_at) VALUES (%s, %s, %s, 1, 'comment', %s, %s, %s, %s, %s, %s)",
            rows,
        )
        return [row[0] for row in conn.execute("SELECT id FROM dm_logs ORDER BY id").fetchall()]


def prepare(
    admin: Any,
    database_url: str,
    env: dict[str, str],
    fan_prefix: str,
    fans: int,
    *,
    subscribe: list[str] | None = None,
) -> tuple[tuple[int, int, int], list[str]]:
    """Lift the sandbox's send limits, store our account (with a token the sandbox minted) and
    campaign, and add the fans; returns (workspace, account, campaign) ids and fan names."""
    admin.update_settings(sends_per_second=10**9, private_replies_per_hour=10**9)
    token = admin.mint_token(ACCOUNT, age_seconds=2 * 86400, subscribe=subscribe)["access_token"]
    ids = seed(database_url, token, env["ENCRYPTION_KEY"])
    names = [f"{fan_prefix}.fan{i}" for i in range(fans)]
    for fan in names:
        admin.add_fan(fan)
    return ids, names


def comment_and_store(
    admin: Any, database_url: str, ids: tuple[int, int, int], fans: list[str]
) -> list[int]:
    """One comment per fan in the sandbox, stored as ingestion would store them; row ids.

    A fan each: the campaign is once per person, so a second comment would be a dedupe skip,
    not a delivery."""
    comments = [admin.fan_comment(fan, MEDIA_ID, "RECIPE") for fan in fans]
    return store_comments(database_url, ids, comments)


async def enqueue_all(env: dict[str, str], dm_log_ids: list[int]) -> None:
    from app.delivery.send.scheduling import enqueue_delivery
    from app.jobs.registry import JOB_OPTIONS
    from app.queue import open_queue
    from app.settings import load_settings

    # Opened as the worker opens its queue, so the jobs carry its options.
    queue = open_queue(load_settings({**env, "QUEUE_NAME": QUEUE}), JOB_OPTIONS)
    await queue.connect()
    try:
        for start in range(0, len(dm_log_ids), 500):
            chunk = dm_log_ids[start : start + 500]
            await asyncio.gather(*(enqueue_delivery(queue, i) for i in chunk))
    finally:
        await queue.disconnect()


def server_transactions(database_url: str, name: str) -> int:
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute(
            "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = %s", (name,)
        ).fetchone()
        return int(row[0]) if row else 0


def wait_all_sent(database_url: str, count: int, stall_s: float = 60.0) -> dict[str, int]:
    """Wait until `count` rows have settled; give up only when none settled for `stall_s`
    seconds (a busy machine is slow, a stuck worker makes no progress)."""
    settled_before, deadline = -1, 0.0
    # Named as an observer: the CPU split leaves this connection's backend out. It still
    # shares the cores with what it measures, so it polls the kept counts (a few rows), not
    # dm_logs (a count over every row, 3 ms each time at 5,000 rows: 3% of a core).
    with psycopg.connect(database_url, autocommit=True, application_name=OBSERVER) as conn:
        while True:
            row = conn.execute(_SETTLED).fetchone()
            sent, settled = (int(row[0]), int(row[1])) if row is not None else (0, 0)
            if sent >= count or settled >= count:
                break
            if settled > settled_before:
                settled_before, deadline = settled, time.monotonic() + stall_s
            elif time.monotonic() > deadline:
                break
            time.sleep(0.1)
        return dict(conn.execute("SELECT pr_state, count(*) FROM dm_logs GROUP BY 1").fetchall())


# Rows sent, and rows settled (in any final state), from the counts the database keeps.
_SETTLED = """
SELECT COALESCE(sum(sent), 0),
       COALESCE(sum(sent + failed + unconfirmed + skipped_dedup + skipped_rate_limit
                     + skipped_quota + skipped_window_expired + skipped_account_paused
                     + skipped_campaign_inactive), 0)
FROM delivery_totals
"""


def run(n: int) -> dict[str, Any]:
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    database = TestDatabase.create()
    redis = TestRedis.reserve()
    try:
        database.migrate()
        with start_sandbox(log_dir=LOG_DIR) as sandbox:
            admin = sandbox.admin
            env = base_env(database.url, redis.url)
            ids, fans = prepare(admin, database.url, env, "bench", n)
            dm_log_ids = comment_and_store(admin, database.url, ids, fans)
            asyncio.run(enqueue_all(env, dm_log_ids))

            counts_file = LOG_DIR / f"deliver-counts-{os.getpid()}.json"
            worker_env = {
                **env,
                "GRAPH_API_BASE": sandbox.graph_base,
                "PRIVATE_REPLIES_PER_HOUR": "100000",
                "QUEUE_NAME": QUEUE,
                "BENCH_COUNTS_FILE": str(counts_file),
                **(
                    {"BENCH_PROFILE": os.environ["BENCH_PROFILE"]}
                    if "BENCH_PROFILE" in os.environ
                    else {}
                ),
            }
            xact_before = server_transactions(database.url, database.name)
            process = sandbox.service.process
            split = CpuSplit(
                database.url,
                database.name,
                sandbox_pid=process.pid if process is not None else None,
                redis_url=redis.url,
            )
            split.start()
            worker = Service(
                "bench-worker",
                ["-m", "bench.deliver", "--worker-process"],
                worker_env,
                LOG_DIR / f"deliver-worker-{os.getpid()}.log",
            ).start()
            try:
                states = wait_all_sent(database.url, n)
            finally:
                split.stop()
                worker.stop()
            time.sleep(1.0)  # let the server publish its statistics
            xact_after = server_transactions(database.url, database.name)
            with psycopg.connect(database.url, autocommit=True) as conn:
                row = conn.execute(
                    "SELECT min(pr_claimed_at), max(pr_sent_at), count(*) FILTER "
                    "(WHERE pr_state = 'SENT') FROM dm_logs"
                ).fetchone()
            first_claim, last_sent, sent = row if row is not None else (None, None, 0)
            counted = json.loads(counts_file.read_text()) if counts_file.exists() else {}
            delivered_messages = len(admin.messages(account=ACCOUNT))
    finally:
        redis.release()
        database.drop()
    span = (last_sent - first_claim).total_seconds() if first_claim and last_sent else 0.0
    statements = counted.get("statements", 0)
    checkouts = counted.get("checkouts", 0)
    pings = counted.get("pings", 0)
    tx_commands = counted.get("begin", 0) + counted.get("commit", 0) + counted.get("rollback", 0)
    per = max(sent, 1)
    worker_cpu = round(
        1000 * counted.get("cpu_s_between_jobs", 0.0) / max(counted.get("jobs", 0) - 1, 1), 2
    )
    others = split.per(sent)
    return {
        "benchmark": "deliver",
        "comments": n,
        "once_per_person": True,
        "distinct_fans": n,
        "sent": sent,
        "states": states,
        "messages_in_sandbox": delivered_messages,
        "seconds_first_claim_to_last_send": round(span, 3),
        "deliveries_per_s": round(sent / span, 1) if span else None,
        "sql": {
            "statements_per_delivery": round(statements / per, 2),
            "pool_checkouts_per_delivery": round(checkouts / per, 2),
            "pre_pings_per_delivery": round(pings / per, 2),
            "begin_commit_rollback_per_delivery": round(tx_commands / per, 2),
            "round_trips_per_delivery": round((statements + pings + tx_commands) / per, 2),
            "server_transactions_per_delivery": round((xact_after - xact_before) / per, 2),
            # New database connections the worker opened (a pool too small for the running
            # jobs opens and closes them all the time, a server process each).
            "connections_opened": counted.get("connects", 0),
            "jobs_counted": counted.get("jobs"),
        },
        "redis": redis_figures(counted, per),
        "worker_cpu_ms_per_delivery": worker_cpu,
        "cpu_ms_per_delivery": {
            "worker": worker_cpu,
            **others,
            "total": round(worker_cpu + sum(others.values()), 2),
        },
        "targets": {"deliveries_per_s": 250, "round_trips_per_delivery": 4},
        "worker_concurrency": int(os.environ.get("WORKER_CONCURRENCY", "32")),
    }


def worker_process() -> int:
    """`--worker-process`: the product's worker, with SQL counters and no crons."""
    from sqlalchemy import event
    from sqlalchemy.engine import Connection, Engine
    from sqlalchemy.pool import Pool

    from app.jobs.registry import JOBS
    from app.logs import configure_logging
    from app.settings import load_settings
    from worker.runner import build_worker, run_in_worker_loop

    counts: Counter[str] = Counter()

    def autocommit(conn: Connection) -> bool:
        return conn.get_execution_options().get("isolation_level") == "AUTOCOMMIT"

    # Counted at the driver: the delivery's hot statements go to psycopg directly
    # (`app.db.raw.driver_of`), the rest through SQLAlchemy, which runs psycopg's cursor too.
    execute = psycopg.AsyncCursor.execute

    async def counted(cursor: Any, *args: Any, **kwargs: Any) -> Any:
        counts["statements"] += 1
        return await execute(cursor, *args, **kwargs)

    psycopg.AsyncCursor.execute = counted  # type: ignore[method-assign,assignment]
    count_redis(counts)

    @event.listens_for(Pool, "connect")
    def _connect(*_: Any) -> None:
        counts["connects"] += 1

    @event.listens_for(Pool, "checkout")
    def _checkout(_dbapi: Any, _record: Any, proxy: Any) -> None:
        counts["checkouts"] += 1
        # Each checkout is also a round trip when the pool pre-pings.
        counts["pings"] += int(bool(getattr(getattr(proxy, "_pool", None), "_pre_ping", False)))

    for name in ("begin", "commit", "rollback"):

        def listener(conn: Connection, *_: Any, _name: str = name) -> None:
            if not autocommit(conn):
                counts[_name] += 1

        event.listen(Engine, name, listener)

    settings = load_settings()
    configure_logging("WARNING")
    # No crons: count the deliveries' own statements only.
    built = build_worker(settings, jobs=[dataclasses.replace(job, cron=None) for job in JOBS])

    # The worker's CPU time from the first job's end to the last one's: its cost per delivery
    # whatever else the machine (sandbox, PostgreSQL) is doing.
    cpu: dict[str, float] = {}

    async def count_job(_: dict[str, Any]) -> None:
        counts["jobs"] += 1
        # Read once: reading the process's CPU time is a system call, inside what it measures.
        spent = time.process_time()
        cpu.setdefault("first", spent)
        cpu["last"] = spent

    built.add_after_process(count_job)
    profile_to = os.environ.get("BENCH_PROFILE")
    try:
        if profile_to:
            import cProfile

            # CPU time, not wall time: on a shared machine a wall-clock profile charges the
            # time this process waited for a core to whatever it was running then.
            profiler = cProfile.Profile(time.process_time)
            try:
                profiler.runcall(run_in_worker_loop, built.start())
            finally:
                profiler.dump_stats(profile_to)
        else:
            run_in_worker_loop(built.start())
    finally:
        window = cpu.get("last", 0.0) - cpu.get("first", 0.0)
        Path(os.environ["BENCH_COUNTS_FILE"]).write_text(
            json.dumps({**counts, "cpu_s_between_jobs": window})
        )
    return 0


# --- webhook received → send issued, at a steady rate ---------------------------------------

# Per comment: webhook stored → ledger and dm_logs rows written (ingest) → send issued.
_LATENCY = """
SELECT extract(epoch FROM d.created_at - w.received_at),
       extract(epoch FROM min(a.started_at) - w.received_at)
FROM dm_logs d
JOIN comments c ON c.id = d.comment_row_id
JOIN webhook_events w ON w.id = c.webhook_event_id
JOIN delivery_attempts a ON a.dm_log_id = d.id AND a.leg = 'private_reply'
GROUP BY d.id, d.created_at, w.received_at
"""


def percentiles(seconds: list[float]) -> dict[str, float | None]:
    ordered = sorted(seconds)
    return {
        "p50": percentile_ms(ordered, 0.50),
        "p95": percentile_ms(ordered, 0.95),
        "p99": percentile_ms(ordered, 0.99),
        "max": percentile_ms(ordered, 1.0),
    }


def webhook_to_send(rate: float, seconds: float) -> dict[str, Any]:
    """Fans comment at `rate` per second; the sandbox's webhooks go to a real web process and
    one worker delivers. Latency per comment from webhook stored to send issued."""
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    database = TestDatabase.create()
    redis = TestRedis.reserve()
    web_port = free_port()
    try:
        database.migrate()
        env = base_env(database.url, redis.url)
        sandbox_extra = {
            **sandbox_env(env),
            "SANDBOX_WEBHOOK_CALLBACK_URL": f"http://127.0.0.1:{web_port}/webhooks/instagram",
            "SANDBOX_WEBHOOK_VERIFY_TOKEN": env["WEBHOOK_VERIFY_TOKEN"],
        }
        with start_sandbox(sandbox_extra, log_dir=LOG_DIR) as sandbox:
            admin = sandbox.admin
            total = int(rate * seconds)
            _, fans = prepare(
                admin, database.url, env, "latency", total, subscribe=["comments", "messages"]
            )
            app_env = {
                **web_env_for(env, sandbox.base_url, f"http://127.0.0.1:{web_port}"),
                "PRIVATE_REPLIES_PER_HOUR": "100000",
                "QUEUE_NAME": QUEUE,
            }
            web = start_web(app_env, web_port, LOG_DIR)
            worker = start_worker(app_env, LOG_DIR, name="latency-worker")
            try:
                worker.wait_until_ready(
                    lambda: worker_beating(web_port), what="the worker's heartbeat"
                )
                wait_until(
                    lambda: bool(admin.webhook().get("registered")),
                    timeout=30,
                    what="the sandbox to verify its webhook callback",
                )
                started = time.monotonic()
                for i in range(total):
                    due = started + i / rate
                    pause = due - time.monotonic()
                    if pause > 0:
                        time.sleep(pause)
                    admin.fan_comment(fans[i], MEDIA_ID, "RECIPE")
                offered = total / (time.monotonic() - started)
                states = wait_all_sent(database.url, total)
            finally:
                worker.stop()
                web.stop()
            with psycopg.connect(database.url, autocommit=True) as conn:
                rows = conn.execute(_LATENCY).fetchall()
                # A comment the reconciler's first sweep read before its webhook came has no
                # webhook to measure from (and was still answered once).
                by_poll = conn.execute(
                    "SELECT count(*) FROM comments WHERE first_seen_via = 'poll'"
                ).fetchone()
    finally:
        redis.release()
        database.drop()
    return {
        "comments": total,
        "rate_per_s": rate,
        "offered_rate_per_s": round(offered, 1),
        "states": states,
        "measured": len(rows),
        "measured_from": LATENCY_FROM,
        "measured_to": LATENCY_TO,
        "seen_first_by_poll": by_poll[0] if by_poll else 0,
        "ms": percentiles([float(row[1]) for row in rows]),
        "ms_to_ingested": percentiles([float(row[0]) for row in rows]),
        "target_p95_ms": 100,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=5000, help="comments to deliver")
    parser.add_argument("--smoke", action="store_true", help="300 comments, a few seconds")
    parser.add_argument("--rate", type=float, default=50.0, help="comments/s for the latency")
    parser.add_argument("--seconds", type=float, default=30.0, help="length of the latency run")
    parser.add_argument("--skip-latency", action="store_true", help="throughput only")
    parser.add_argument("--worker-process", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker_process:
        return worker_process()
    result = run(300 if args.smoke else args.n)
    ok = result["sent"] == result["comments"]
    if not args.skip_latency:
        latency = webhook_to_send(args.rate, 5.0 if args.smoke else args.seconds)
        result["webhook_to_send"] = latency
        sent = latency["states"].get("SENT", 0)
        ok = ok and sent == latency["comments"] and latency["measured"] > 0
    print(json.dumps(result, indent=2, default=str))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
