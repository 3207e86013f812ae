"""What the kept delivery counts cost a delivery's writes: the trigger on `dm_logs` on and off.

    uv run python -m bench.delivery_counts_cost            # 4 rounds of 2,000 deliveries each
    uv run python -m bench.delivery_counts_cost --smoke    # 1 round of 200

A scratch database migrated to head; one campaign. Each round writes `--n` deliveries as the
worker does, each statement its own transaction (autocommit): insert the PENDING row, claim it
(IN_FLIGHT, the message kind), note the request, record it SENT; `--tasks` connections at once,
every delivery in the same 15-minute slice, so every counted statement upserts the same kept
rows (the hot rows the counts could make a queue of). Rounds alternate: the trigger on, then
off (`ALTER TABLE dm_logs DISABLE TRIGGER …`), so a machine whose speed drifts treats both
alike. Prints one JSON document: per mode, the deliveries per second of each round and their
median, and the median of the per-statement milliseconds; `on_over_off` is the ratio of the
medians. With the trigger on, the kept counts must agree with the rows afterwards (exit 1 if
not); a round that fails (a deadlock) fails the run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from datetime import UTC, datetime
from itertools import count
from typing import Any

import psycopg
from sqlalchemy.ext.asyncio import create_async_engine

from tests.support.infra import TestDatabase
from tests.support.kept_counts import kept_count_differences

_SEED = """
WITH ws AS (INSERT INTO workspaces (name) VALUES ('cost') RETURNING id),
acct AS (
    INSERT INTO instagram_accounts (workspace_id, ig_user_id, username)
    SELECT id, '17841400000000001', 'cost' FROM ws RETURNING id, workspace_id
)
INSERT INTO campaigns (workspace_id, account_id, name, scope, status)
SELECT workspace_id, id, 'cost', 'any_post', 'active' FROM acct
RETURNING workspace_id, account_id, id
"""
_INSERT = """
INSERT INTO dm_logs (workspace_id, account_id, campaign_id, campaign_version, trigger_kind,
                     trigger_id, recipient_id, pr_state, deadline_at)
VALUES (%s, %s, %s, 1, 'comment', %s, %s, 'PENDING', now() + interval '7 days') RETURNING id
"""
_CLAIM = (
    "UPDATE dm_logs SET pr_state = 'IN_FLIGHT', message_kind = 'reveal', "
    "pr_attempts = pr_attempts + 1 WHERE id = %s"
)
_NOTE = "UPDATE dm_logs SET pr_requested_at = now() WHERE id = %s"
_SENT = "UPDATE dm_logs SET pr_state = 'SENT', pr_sent_at = now() WHERE id = %s"
_ids = count(1)


async def _round(url: str, world: tuple[int, int, int], n: int, tasks: int) -> dict[str, float]:
    ws, account, campaign = world
    per_statement: list[float] = []

    async def one(share: int) -> None:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            for _ in range(share):
                key = next(_ids)
                started = time.perf_counter()
                cur = await conn.execute(_INSERT, (ws, account, campaign, f"c{key}", f"{key}"))
                row = await cur.fetchone()
                if row is None:
                    raise RuntimeError("the insert returned no id")
                for sql in (_CLAIM, _NOTE, _SENT):
                    await conn.execute(sql, (row[0],))
                per_statement.append((time.perf_counter() - started) * 250)  # ms / 4 statements

    started = time.perf_counter()
    await asyncio.gather(*(one(n // tasks) for _ in range(tasks)))
    seconds = time.perf_counter() - started
    return {
        "deliveries_per_s": round(len(per_statement) / seconds, 1),
        "ms_per_statement": round(statistics.median(per_statement), 3),
    }


_TRIGGERS = ("dm_logs_counts_insert", "dm_logs_counts_update", "dm_logs_counts_delete")


def _toggle(url: str, on: bool) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        for trigger in _TRIGGERS:
            conn.execute(f"ALTER TABLE dm_logs {'ENABLE' if on else 'DISABLE'} TRIGGER {trigger}")


async def run(url: str, rounds: int, n: int, tasks: int) -> dict[str, Any]:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(_SEED).fetchone()
        if row is None:
            raise RuntimeError("no campaign seeded")
        world = (int(row[0]), int(row[1]), int(row[2]))
    modes: dict[str, list[dict[str, float]]] = {"on": [], "off": []}
    for _ in range(rounds):
        for mode in ("on", "off"):
            _toggle(url, mode == "on")
            modes[mode].append(await _round(url, world, n, tasks))
    # The "off" rounds' rows were never counted: start the checked round from empty tables.
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "TRUNCATE delivery_counts, delivery_totals, delivery_workspace_quarters, "
            "funnel_people, dm_logs CASCADE"
        )
    _toggle(url, True)
    check = await _round(url, world, n, tasks)
    engine = create_async_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        wrong = await kept_count_differences(engine)
    finally:
        await engine.dispose()
    summary: dict[str, Any] = {}
    for mode, results in modes.items():
        summary[mode] = {
            "deliveries_per_s": [r["deliveries_per_s"] for r in results],
            "median_deliveries_per_s": statistics.median(r["deliveries_per_s"] for r in results),
            "median_ms_per_statement": statistics.median(r["ms_per_statement"] for r in results),
        }
    off = summary["off"]["median_deliveries_per_s"]
    return {
        **summary,
        "on_over_off": round(summary["on"]["median_deliveries_per_s"] / off, 3) if off else None,
        "check_round": check,
        "wrong": wrong,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="1 round of 200 deliveries")
    parser.add_argument("--n", type=int, default=2000, help="deliveries per round")
    parser.add_argument("--rounds", type=int, default=4, help="rounds per mode, alternating")
    parser.add_argument("--tasks", type=int, default=16, help="connections writing at once")
    args = parser.parse_args()
    rounds, n = (1, 200) if args.smoke else (args.rounds, args.n)
    database = TestDatabase.create()
    try:
        database.migrate()
        result = asyncio.run(run(database.url, rounds, n, args.tasks))
    finally:
        database.drop()
    print(
        json.dumps(
            {
                "bench": "delivery_counts_cost",
                "deliveries_per_round": n,
                "tasks": args.tasks,
                **result,
                "ok": not result["wrong"],
                "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
            },
            indent=2,
            default=str,
        )
    )
    return 1 if result["wrong"] else 0


if __name__ == "__main__":
    sys.exit(main())
