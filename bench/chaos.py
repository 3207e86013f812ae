"""Chaos run: random faults and a worker SIGKILL, then prove "once, never twice, never lost".

    uv run python -m bench.chaos            # 400 comments
    uv run python -m bench.chaos --smoke    # 60 comments, for `make test`

A scratch database, Redis db and sandbox; N comments stored as ingestion would store them;
every job enqueued twice (a redelivered webhook and a reconciler); the sandbox injects, at
random, deliver-then-error (code 1), deliver-then-hang past the client timeout,
deliver-then-reset, rate-limit (4) and final (551, 10/2534022) rejections and latency. One
worker process is SIGKILLed mid-run and another takes over (its stale-claim sweep settles
what the dead one held). Retries wait 5 or 15 minutes in production; here the run pulls due
times forward ("time warp") until every row is final.

Then it checks, from the sandbox's inspection API, that no comment got more than one private
reply, that every row is final (SENT/FAILED/UNCONFIRMED/SKIPPED_*), and that the states agree
with the inbox (SENT → exactly one; FAILED/SKIPPED → none). Prints JSON; exits 1 on a
violation.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import time
from collections import Counter
from typing import Any

import psycopg

from bench.deliver import LOG_DIR, QUEUE, comment_and_store, prepare
from tests.support.infra import TestDatabase, TestRedis, base_env
from tests.support.processes import Service
from tests.support.sandbox_process import start_sandbox

SEND_TIMEOUT_S = 1.0
FINAL_PENDING = ("PENDING", "IN_FLIGHT")


def faults(admin: Any, rng: random.Random) -> list[dict[str, Any]]:
    specs: list[dict[str, Any]] = [
        {"action": "deliver_then_error", "code": 1, "probability": 0.04},
        {"action": "deliver_then_error", "http_status": 500, "probability": 0.03},
        {"action": "deliver_then_hang", "seconds": SEND_TIMEOUT_S + 1.5, "probability": 0.03},
        {"action": "deliver_then_reset", "probability": 0.03},
        {"action": "reject", "code": 4, "probability": 0.06},
        {"action": "reject", "code": 551, "probability": 0.03},
        {"action": "reject", "code": 10, "subcode": 2534022, "probability": 0.02},
        {"action": "latency", "seconds": round(rng.uniform(0.01, 0.05), 3), "probability": 0.2},
    ]
    rng.shuffle(specs)
    for spec in specs:
        admin.add_fault("messages", **spec)
    return specs


async def enqueue_twice(worker_env: dict[str, str], ids: list[int]) -> None:
    from app.delivery.send.scheduling import enqueue_delivery
    from app.jobs.registry import JOB_OPTIONS
    from app.queue import JobName, enqueue, open_queue
    from app.settings import load_settings

    # Opened as the product opens it, so jobs carry the timeout of the workers' send timeout:
    # a job the SIGKILL left active holds its key until SAQ's sweep finds it past that
    # timeout, and only then can a re-enqueue of the row's key take.
    queue = open_queue(load_settings(worker_env), JOB_OPTIONS)
    await queue.connect()
    try:
        for dm_log_id in ids:
            await enqueue_delivery(queue, dm_log_id)
            await enqueue(
                queue, JobName.PROCESS_COMMENT, key=f"again:{dm_log_id}", dm_log_id=dm_log_id
            )
    finally:
        await queue.disconnect()


def states(database_url: str) -> Counter[str]:
    with psycopg.connect(database_url, autocommit=True) as conn:
        return Counter(
            dict(conn.execute("SELECT pr_state, count(*) FROM dm_logs GROUP BY 1").fetchall())
        )


def time_warp(database_url: str) -> list[int]:
    """Pull waiting retries forward; return every PENDING row, to enqueue again as the
    reconciler and the relay would (the keys coalesce with jobs still waiting)."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        rows = conn.execute(
            "UPDATE dm_logs SET pr_next_attempt_at = LEAST(pr_next_attempt_at, "
            "now() - interval '1 second') WHERE pr_state = 'PENDING' RETURNING id"
        ).fetchall()
        return [row[0] for row in rows]


def check(admin: Any, rows: list[tuple[str, str]]) -> tuple[list[str], int]:
    """Compare every row's state with what the sandbox says the fan received."""
    violations: list[str] = []
    delivered_total = 0
    for comment_id, state in rows:
        delivered = admin.comment_stats(comment_id)["private_replies_delivered"]
        delivered_total += delivered
        if delivered > 1:
            violations.append(f"{comment_id}: {delivered} private replies")
        if state in FINAL_PENDING:
            violations.append(f"{comment_id}: not final ({state})")
        elif state == "SENT" and delivered != 1:
            violations.append(f"{comment_id}: SENT but {delivered} delivered")
        elif (state == "FAILED" or state.startswith("SKIPPED_")) and delivered != 0:
            violations.append(f"{comment_id}: {state} but {delivered} delivered")
    return violations, delivered_total


def run(n: int, seed_value: int) -> dict[str, Any]:
    rng = random.Random(seed_value)
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    database = TestDatabase.create()
    redis = TestRedis.reserve()
    started = time.monotonic()
    try:
        database.migrate()
        with start_sandbox(log_dir=LOG_DIR) as sandbox:
            admin = sandbox.admin
            env = base_env(database.url, redis.url)
            ids, fans = prepare(admin, database.url, env, "chaos", n)
            dm_log_ids = comment_and_store(admin, database.url, ids, fans)
            injected = faults(admin, rng)
            worker_env = {
                **env,
                "GRAPH_API_BASE": sandbox.graph_base,
                "PRIVATE_REPLIES_PER_HOUR": "100000",
                "QUEUE_NAME": QUEUE,
                "SEND_TIMEOUT_S": str(SEND_TIMEOUT_S),
                "WORKER_CONCURRENCY": "16",
            }
            asyncio.run(enqueue_twice(worker_env, dm_log_ids))

            def worker(name: str) -> Service:
                log = LOG_DIR / f"chaos-{name}-{os.getpid()}.log"
                return Service(name, ["-m", "worker"], worker_env, log).start()

            first = worker("first")
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                done = sum(v for k, v in states(database.url).items() if k != "PENDING")
                if done >= n * rng.uniform(0.25, 0.5):
                    break
                time.sleep(0.05)
            first.kill()  # SIGKILL, mid-run, sends possibly in flight
            killed_at = dict(states(database.url))
            second = worker("second")
            try:
                deadline = time.monotonic() + max(120.0, n / 5)
                while time.monotonic() < deadline:
                    now = states(database.url)
                    if not any(now.get(k, 0) for k in FINAL_PENDING):
                        break
                    warped = time_warp(database.url)
                    if warped:
                        asyncio.run(enqueue_twice(worker_env, warped))
                    time.sleep(0.5)
            finally:
                second.stop()
            final = dict(states(database.url))
            with psycopg.connect(database.url, autocommit=True) as conn:
                rows = [
                    (str(r[0]), str(r[1]))
                    for r in conn.execute("SELECT trigger_id, pr_state FROM dm_logs").fetchall()
                ]
            violations, delivered_total = check(admin, rows)
    finally:
        redis.release()
        database.drop()
    return {
        "benchmark": "chaos",
        "comments": n,
        "seed": seed_value,
        "faults": injected,
        "states_when_worker_killed": killed_at,
        "final_states": final,
        "private_replies_delivered": delivered_total,
        "violations": violations[:50],
        "ok": not violations,
        "seconds": round(time.monotonic() - started, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=400, help="comments")
    parser.add_argument("--smoke", action="store_true", help="60 comments, for CI")
    parser.add_argument("--seed", type=int, default=None, help="fault randomness seed")
    args = parser.parse_args()
    seed_value = args.seed if args.seed is not None else random.SystemRandom().randrange(10**6)
    result = run(60 if args.smoke else args.n, seed_value)
    print(json.dumps(result, indent=2, default=str))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
