"""Delivery-log queries on a million rows: every filter combination must walk an index.

    uv run python -m bench.log_queries            # 1,000,000 dm_logs + 1,000,000 comments
    uv run python -m bench.log_queries --smoke    # 20,000 of each, seconds (CI)
    uv run python -m bench.log_queries --rows 2000000

Creates a scratch PostgreSQL database migrated to head, loads it with `INSERT … SELECT
generate_series` (the secondary indexes of `dm_logs` and `comments` are dropped for the load
and re-created from their own stored definitions afterwards, so the schema ends identical to
the migration's), runs ANALYZE, then takes every statement the dashboard runs — built by the
app's own query functions, not re-typed here — and for each:

- `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)`: the plan must contain no Seq Scan on `dm_logs`
  or `comments`, and an index scan on the table it reads;
- runs it `--repeat` times on a warm cache and reports median and max wall time (ms).

The data: 90 days of deliveries, 90 % in one busy workspace (3 accounts, 20 campaigns, one
campaign with 40 % of the rows), 10 % in four others; states as a creator sees them (85 %
SENT, 6 % SKIPPED_DEDUP, 3 % FAILED, 0.5 % UNCONFIRMED…), 200,000 distinct commenters;
misses are 70 % of the ledger. Prints one JSON document; exit status 1 if any plan fails.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from sqlalchemy import ClauseElement, Select
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from app.db.models import DmLog, MissReason
from app.delivery_log.export import export_csv
from app.delivery_log.filters import Key, LiveWindow, LogFilter, MissFilter
from app.delivery_log.misses import misses_select
from app.delivery_log.overview import load_overview
from app.delivery_log.queries import (
    PAGE_SIZE,
    Names,
    log_select,
    new_rows_select,
    page_select,
)
from app.workspaces.time_zone import start_of_day
from tests.support.infra import TestDatabase

CAMPAIGNS = 20
OTHER_WORKSPACES = 4
DAYS = 90
TABLES = ("dm_logs", "comments", "webhook_events")

_SEED = """
WITH ws AS (
    INSERT INTO workspaces (name) SELECT 'bench ' || n FROM generate_series(0, %(others)s) n
    RETURNING id
)
SELECT array_agg(id ORDER BY id) FROM ws
"""
_ACCOUNT = (
    "INSERT INTO instagram_accounts (workspace_id, ig_user_id, username) "
    "VALUES (%s, %s, %s) RETURNING id"
)
_CAMPAIGN = (
    "INSERT INTO campaigns (workspace_id, account_id, name, scope, status) "
    "VALUES (%s, %s, %s, 'any_post', 'active') RETURNING id"
)

# h: 31 pseudo-random bits per row; `big` picks the busy workspace for 9 rows in 10.
_DM_LOGS = """
INSERT INTO dm_logs (
    workspace_id, account_id, campaign_id, campaign_version, trigger_kind, trigger_id,
    recipient_id, recipient_username, trigger_text, matched_keyword, media_id, deadline_at,
    created_at, updated_at, pr_state, pr_attempts, pr_attempt_limit, pub_state, pr_error_code,
    message_kind, pr_sent_at)
SELECT ws, acct, camp, 1,
       CASE WHEN h %% 50 = 0 THEN 'message' ELSE 'comment' END,
       'c' || g, (17000000 + (h >> 4) %% 200000)::text, 'fan_' || ((h >> 4) %% 200000),
       CASE (h >> 12) %% 5
            WHEN 0 THEN 'RECIPE please ' || substr(md5(g::text), 1, 10)
            WHEN 1 THEN 'recipe pls 🍋'
            WHEN 2 THEN 'GUIDE!!'
            WHEN 3 THEN 'love this ' || substr(md5(g::text), 1, 6)
            ELSE 'Can I get the recipe?' END,
       'recipe', '1790000000000' || (h %% 50), at + interval '7 days', at, at,
       st, CASE WHEN st IN ('PENDING') THEN 0 ELSE 1 END, 3,
       CASE WHEN (h >> 16) %% 10 < 3 THEN 'SENT' END,
       CASE WHEN st = 'FAILED' THEN 551 END,
       CASE WHEN (h >> 24) %% 10 = 0 THEN 'opening_dm' ELSE 'reveal' END,
       CASE WHEN st = 'SENT' THEN at + (h %% 20) * interval '1 second' END
FROM (
    SELECT g, h, at,
           CASE WHEN big THEN %(ws)s ELSE (%(other_ws)s::bigint[])[slot] END AS ws,
           CASE WHEN big THEN (%(camp_account)s::bigint[])[ci]
                ELSE (%(other_acct)s::bigint[])[slot] END AS acct,
           CASE WHEN big THEN (%(camps)s::bigint[])[ci]
                ELSE (%(other_camp)s::bigint[])[slot] END AS camp,
           CASE WHEN s < 850 THEN 'SENT' WHEN s < 910 THEN 'SKIPPED_DEDUP'
                WHEN s < 940 THEN 'FAILED' WHEN s < 950 THEN 'SKIPPED_WINDOW_EXPIRED'
                WHEN s < 960 THEN 'SKIPPED_QUOTA' WHEN s < 965 THEN 'SKIPPED_RATE_LIMIT'
                WHEN s < 970 THEN 'SKIPPED_ACCOUNT_PAUSED'
                WHEN s < 975 THEN 'SKIPPED_CAMPAIGN_INACTIVE' WHEN s < 980 THEN 'UNCONFIRMED'
                WHEN s < 995 THEN 'PENDING' ELSE 'IN_FLIGHT' END AS st
    FROM (
        SELECT g, h, g %% 10 <> 0 AS big, (h >> 8) %% 1000 AS s,
               1 + (g / 10) %% %(n_other)s AS slot,
               CASE WHEN h %% 100 < 40 THEN 1 ELSE 2 + h %% 19 END AS ci,
               %(start)s::timestamptz + (g::float8 / %(n)s) * (%(days)s * interval '1 day')
                   + (h %% 1000) * interval '1 millisecond' AS at
        FROM (SELECT g, hashint4(g)::bigint & 2147483647 AS h
              FROM generate_series(1, %(n)s) g) r
    ) p
) q
"""
_COMMENTS = """
INSERT INTO comments (account_id, comment_id, media_id, text, commenter_id, commenter_username,
                      commented_at, first_seen_via, outcome, miss_reason, created_at)
SELECT acct, 'k' || g, '1790000000000' || (h %% 50),
       CASE (h >> 12) %% 4 WHEN 0 THEN 'so pretty ' || substr(md5(g::text), 1, 8)
            WHEN 1 THEN 'RECIPE please' WHEN 2 THEN 'giveaway recipe' ELSE 'where is this?' END,
       (17000000 + (h >> 4) %% 200000)::text, 'fan_' || ((h >> 4) %% 200000),
       at - interval '1 second', CASE WHEN h %% 20 = 0 THEN 'poll' ELSE 'webhook' END,
       CASE WHEN missed THEN 'missed' ELSE 'matched' END,
       CASE WHEN NOT missed THEN NULL
            ELSE (ARRAY['no_keyword', 'no_keyword', 'no_keyword', 'excluded_keyword',
                        'own_comment', 'reply_to_comment', 'no_campaign_for_post'])
                 [1 + (h >> 20) %% 7] END,
       at
FROM (
    SELECT g, h, (h >> 8) %% 10 < 7 AS missed,
           CASE WHEN g %% 10 = 0 THEN (%(other_acct)s::bigint[])[1 + (g / 10) %% %(n_other)s]
                ELSE (%(accounts)s::bigint[])[1 + h %% 3] END AS acct,
           %(start)s::timestamptz + (g::float8 / %(n)s) * (%(days)s * interval '1 day') AS at
    FROM (SELECT g, hashint4(g + 7)::bigint & 2147483647 AS h
          FROM generate_series(1, %(n)s) g) r
) p
"""


# A tenth as many webhook POSTs over the last 30 days (retention keeps 30), some redelivered.
_WEBHOOK_EVENTS = """
INSERT INTO webhook_events (received_at, body, signature_key, status, item_count, processed_at,
                            details)
SELECT at, convert_to('{"object":"instagram","entry":[]}', 'UTF8'), 'instagram', 'processed', 1,
       at, jsonb_build_object('comments', jsonb_build_object(
           'new', 1, 'duplicate', CASE WHEN g %% 20 = 0 THEN 1 ELSE 0 END))
FROM (SELECT g, now() - interval '30 days' + (g::float8 / %(n)s) * interval '30 days' AS at
      FROM generate_series(1, %(n)s) g) r
"""


def _secondary_indexes(conn: psycopg.Connection[Any]) -> list[tuple[str, str]]:
    """Indexes of the loaded tables that no constraint owns: dropped for the load."""
    return list(
        conn.execute(
            "SELECT i.indexname, i.indexdef FROM pg_indexes i "
            "WHERE i.tablename = ANY(%s) AND NOT EXISTS "
            "(SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname)",
            (list(TABLES),),
        ).fetchall()
    )


def _one(conn: psycopg.Connection[Any], sql: str, params: Any) -> Any:
    row = conn.execute(sql, params).fetchone()
    if row is None:
        raise RuntimeError(f"no row from {sql[:60]}")
    return row[0]


def load(url: str, rows: int) -> dict[str, Any]:
    """The scratch world; returns the ids the queries need and how long loading took."""
    started = time.perf_counter()
    start = datetime.now(UTC) - timedelta(days=DAYS) + timedelta(hours=1)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET maintenance_work_mem = '512MB'")
        ws, *others = _one(conn, _SEED, {"others": OTHER_WORKSPACES})
        accounts = [_one(conn, _ACCOUNT, (ws, f"178414{n:011d}", f"busy.{n}")) for n in range(3)]
        camps, camp_account = [], []
        for n in range(CAMPAIGNS):
            account = accounts[0] if n == 0 else accounts[n % 3]
            camps.append(_one(conn, _CAMPAIGN, (ws, account, f"campaign {n}")))
            camp_account.append(account)
        other_acct, other_camp = [], []
        for n, other in enumerate(others):
            account = _one(conn, _ACCOUNT, (other, f"179999{n:011d}", f"other.{n}"))
            other_acct.append(account)
            other_camp.append(_one(conn, _CAMPAIGN, (other, account, "other")))
        indexes = _secondary_indexes(conn)
        for name, _ in indexes:
            conn.execute(f'DROP INDEX "{name}"')
        params = {
            "n": rows,
            "days": DAYS,
            "start": start,
            "ws": ws,
            "other_ws": others,
            "n_other": len(others),
            "camps": camps,
            "camp_account": camp_account,
            "other_acct": other_acct,
            "other_camp": other_camp,
            "accounts": accounts,
        }
        conn.execute(_DM_LOGS, params)
        conn.execute(_COMMENTS, params)
        conn.execute(_WEBHOOK_EVENTS, {"n": max(1, rows // 10)})
        loaded = time.perf_counter()
        for _, definition in indexes:
            conn.execute(definition)
        conn.execute("ANALYZE")
    return {
        "workspace_id": ws,
        "accounts": accounts,
        "campaigns": camps,
        "load_s": round(loaded - started, 1),
        "index_s": round(time.perf_counter() - loaded, 1),
        "rows": rows,
    }


def _walk(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _walk(child)


def judge(plan: dict[str, Any]) -> tuple[bool, list[str]]:
    """No Seq Scan on our tables, and at least one index scan serving them."""
    nodes = list(_walk(plan))
    ours = [n for n in nodes if n.get("Relation Name") in TABLES or n.get("Index Name")]
    seq = [n for n in ours if n["Node Type"] == "Seq Scan"]
    indexed = [n for n in ours if n.get("Index Name")]
    summary = [
        " ".join(
            part
            for part in (
                n["Node Type"],
                n.get("Index Name", ""),
                f"on {n['Relation Name']}" if n.get("Relation Name") else "",
            )
            if part
        )
        for n in ours
    ]
    return (not seq and bool(indexed)), summary


async def explain_and_time(
    engine: AsyncEngine, stmt: ClauseElement, repeat: int
) -> tuple[dict[str, Any], list[float], int]:
    """`stmt`'s EXPLAIN ANALYZE report, then the milliseconds of `repeat` runs and the rows the
    last one gave, all on one connection."""
    compiled = stmt.compile(dialect=engine.dialect, compile_kwargs={"render_postcompile": True})
    sql, params = str(compiled), compiled.params
    async with engine.connect() as conn:
        explained = (
            await conn.exec_driver_sql("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql, params)
        ).scalar_one()
        times, found = [], 0
        for _ in range(repeat):
            started = time.perf_counter()
            found = len((await conn.exec_driver_sql(sql, params)).all())
            times.append((time.perf_counter() - started) * 1000)
    report = explained[0] if isinstance(explained, list) else json.loads(explained)[0]
    return report, times, found


async def measure(engine: AsyncEngine, name: str, stmt: Select[Any], repeat: int) -> dict[str, Any]:
    report, times, found = await explain_and_time(engine, stmt, repeat)
    ok, nodes = judge(report["Plan"])
    return {
        "name": name,
        "ok": ok,
        "rows": found,
        "ms_median": round(statistics.median(times), 2),
        "ms_max": round(max(times), 2),
        "plan": nodes,
    }


def log_cases(world: dict[str, Any]) -> list[tuple[str, dict[str, str], dict[str, Any]]]:
    """(name, query-string filters, paging) for the delivery log."""
    camps, accounts = world["campaigns"], world["accounts"]
    now = datetime.now(UTC)
    week_from = (now - timedelta(days=37)).date().isoformat()
    week_to = (now - timedelta(days=30)).date().isoformat()
    busy, small = str(camps[0]), str(camps[7])
    rare_text = _rare_text(world)
    return [
        ("first page", {}, {}),
        ("deep page (cursor mid-way)", {}, {"older": world["middle"]}),
        ("newer page (cursor mid-way)", {}, {"newer": world["middle"]}),
        ("state FAILED", {"state": "FAILED"}, {}),
        ("state UNCONFIRMED", {"state": "UNCONFIRMED"}, {}),
        ("state SKIPPED (any of 6)", {"state": "SKIPPED"}, {}),
        ("state SENT, deep page", {"state": "SENT"}, {"older": world["middle"]}),
        ("campaign with 40% of rows", {"campaign": busy}, {}),
        ("small campaign", {"campaign": small}, {}),
        ("small account", {"account": str(accounts[2])}, {}),
        ("trigger DM keyword (2%)", {"trigger": "message"}, {}),
        ("trigger story reply (none)", {"trigger": "story_reply"}, {}),
        ("trigger comment (98%)", {"trigger": "comment"}, {}),
        ("trigger DM keyword + FAILED", {"trigger": "message", "state": "FAILED"}, {}),
        ("search username (rare)", {"q": "fan_123456"}, {}),
        ("search @username prefix", {"q": "@fan_1234"}, {}),
        ("search text (rare)", {"q": rare_text}, {}),
        ("search text (common)", {"q": "recipe"}, {}),
        ("search (no match)", {"q": "zzqqxx"}, {}),
        ("date range, one week", {"from": week_from, "to": week_to}, {}),
        ("FAILED + busy campaign", {"state": "FAILED", "campaign": busy}, {}),
        ("UNCONFIRMED + account", {"state": "UNCONFIRMED", "account": str(accounts[1])}, {}),
        ("small campaign + common text", {"campaign": small, "q": "recipe"}, {}),
        ("FAILED + date range", {"state": "FAILED", "from": week_from, "to": week_to}, {}),
        (
            "account + date + rare username",
            {"account": str(accounts[0]), "from": week_from, "to": week_to, "q": "fan_1234"},
            {},
        ),
        (
            "everything",
            {
                "state": "FAILED",
                "campaign": busy,
                "account": str(accounts[0]),
                "q": "recipe",
                "from": week_from,
                "to": week_to,
            },
            {},
        ),
        (
            "UNCONFIRMED + small campaign + no-match text",
            {"state": "UNCONFIRMED", "campaign": small, "q": "zzqqxx"},
            {},
        ),
    ]


def _rare_text(world: dict[str, Any]) -> str:
    return str(world["rare_text"])


async def run(url: str, world: dict[str, Any], repeat: int) -> dict[str, Any]:
    engine = create_async_engine(url, pool_size=2)
    ws = world["workspace_id"]
    results: list[dict[str, Any]] = []
    try:
        async with engine.connect() as conn:
            row = (
                await conn.exec_driver_sql(
                    "SELECT created_at, id FROM dm_logs WHERE workspace_id = %(ws)s "
                    "ORDER BY created_at DESC, id DESC OFFSET %(off)s LIMIT 1",
                    {"ws": ws, "off": world["rows"] // 3},
                )
            ).one()
            world["middle"] = Key.of(row[0], row[1])
            text_row = (
                await conn.exec_driver_sql(
                    "SELECT substr(trigger_text, 15, 8) FROM dm_logs WHERE workspace_id = %(ws)s "
                    "AND trigger_text LIKE 'RECIPE please %%' LIMIT 1",
                    {"ws": ws},
                )
            ).scalar_one()
            world["rare_text"] = text_row
            newest = (
                await conn.exec_driver_sql(
                    "SELECT created_at, id FROM dm_logs WHERE workspace_id = %(ws)s "
                    "ORDER BY created_at DESC, id DESC LIMIT 1",
                    {"ws": ws},
                )
            ).one()
        for name, params, paging in log_cases(world):
            f = LogFilter.parse(params)
            stmt = page_select(
                ws, f, older=paging.get("older"), newer=paging.get("newer"), limit=PAGE_SIZE + 1
            )
            results.append({"view": "log", **await measure(engine, name, stmt, repeat)})
        top = LiveWindow.start([Key.of(newest[0], newest[1])], page_full=False)
        results.append(
            {
                "view": "log poll",
                **await measure(
                    engine,
                    "new rows since the page opened",
                    new_rows_select(ws, LogFilter(), top),
                    repeat,
                ),
            }
        )
        ids_stmt = log_select(ws, LogFilter()).where(
            DmLog.id.in_(list(range(newest[1] - 200, newest[1])))
        )
        results.append(
            {
                "view": "log poll",
                **await measure(engine, "changed rows by id (200)", ids_stmt, repeat),
            }
        )
        for name, params, paging in miss_cases(world):
            misses = MissFilter.parse(params)
            accounts = [a for a in world["accounts"] if misses.account_id in (None, a)]
            stmt = misses_select(
                accounts, misses, older=paging.get("older"), newer=None, limit=PAGE_SIZE + 1
            )
            results.append({"view": "misses", **await measure(engine, name, stmt, repeat)})
        results.append(await overview_timing(engine, ws, repeat))
        results.append(await export_timing(engine, ws))
    finally:
        await engine.dispose()
    return {"queries": results}


def miss_cases(world: dict[str, Any]) -> list[tuple[str, dict[str, str], dict[str, Any]]]:
    now = datetime.now(UTC)
    return [
        ("first page (3 accounts merged)", {}, {}),
        ("deep page", {}, {"older": world["middle"]}),
        ("reason excluded_keyword", {"reason": MissReason.EXCLUDED_KEYWORD.value}, {}),
        ("one account + date range", {"account": str(world["accounts"][1]),
         "from": (now - timedelta(days=40)).date().isoformat(),
         "to": (now - timedelta(days=39)).date().isoformat()}, {}),
        ("search username (rare)", {"q": "@fan_123456"}, {}),
        ("search text (common)", {"q": "pretty"}, {}),
    ]  # fmt: skip


async def overview_timing(engine: AsyncEngine, ws: int, repeat: int) -> dict[str, Any]:
    from sqlalchemy.ext.asyncio import AsyncSession

    times = []
    async with AsyncSession(engine) as session:
        for _ in range(repeat):
            started = time.perf_counter()
            overview = await load_overview(session, ws, start_of_day(UTC))
            times.append((time.perf_counter() - started) * 1000)
    return {
        "view": "overview",
        "name": "today per account + duplicates + events (load_overview)",
        "ok": True,
        "rows": overview.totals.total,
        "ms_median": round(statistics.median(times), 2),
        "ms_max": round(max(times), 2),
    }


async def export_timing(engine: AsyncEngine, ws: int) -> dict[str, Any]:
    """Stream the CSV of one filter (every FAILED delivery) to the end."""
    started = time.perf_counter()
    size, chunks = 0, 0
    async for chunk in export_csv(engine, ws, LogFilter(state="FAILED"), Names({}, {})):
        size += len(chunk)
        chunks += 1
    seconds = time.perf_counter() - started
    return {
        "view": "export",
        "name": "CSV of every FAILED delivery, streamed",
        "ok": True,
        "bytes": size,
        "chunks": chunks,
        "seconds": round(seconds, 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="20,000 rows, for CI")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    rows = 20_000 if args.smoke else args.rows
    database = TestDatabase.create()
    try:
        database.migrate()
        world = load(database.url, rows)
        url = database.url.replace("postgresql://", "postgresql+psycopg://", 1)
        measured = asyncio.run(run(url, world, 3 if args.smoke else args.repeat))
    finally:
        database.drop()
    failed = [q["name"] for q in measured["queries"] if not q["ok"]]
    print(
        json.dumps(
            {
                "bench": "log_queries",
                "mode": "smoke" if args.smoke else "full",
                "dm_logs_rows": rows,
                "comments_rows": rows,
                "load_s": world["load_s"],
                "index_build_s": world["index_s"],
                "ok": not failed,
                "failed": failed,
                **measured,
            },
            indent=2,
            default=str,
        )
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
