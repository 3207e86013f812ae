"""Tracked-link redirect benchmark: `GET /go/<token>` on one web process.

    uv run python -m bench.clicks            # full run (about half a minute)
    uv run python -m bench.clicks --smoke    # seconds, for CI (exit status 1 on wrong answers)

Starts its own web process against a scratch database and Redis db, seeds deliveries, and
drives the redirect with the lean keep-alive client of `bench.http_load`, each request a
person's click (a phone's user agent) on one of the seeded deliveries' links. Prints JSON:

- `ceiling`: the same server's webhook verification handshake, closed loop: the cheapest
  path through this server (no bench-only route ships), so `ratio_to_ceiling` is what a
  redirect costs relative to answering at all;
- `redirect_max`: redirects, closed loop;
- `redirect_steady`: redirects due at a steady rate (1,000/s; 200/s in the smoke run), p50 and
  p99 counted from when each was due;
- `recorded`: after the load, the clicks in `link_clicks` (copied from the spool by the web's
  background copier) against the redirects answered: they must be equal — every click once.

Target (one web process, 2 cores shared with this client): p99 ≤ 10 ms at 1,000 clicks/s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg

from app.clicks.links import LinkTracker
from app.clicks.tokens import link_key
from bench.http_load import LoadResult, closed_loop, open_loop, render_request
from tests.support.infra import TEST_SECRET_KEY, TestDatabase, TestRedis, base_env
from tests.support.processes import Service, free_port, start_web, wait_until

PHONE_UA = (
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 "
    "(KHTML, like Gecko) Mobile/15E148 Instagram 321.0.0.29.112"
)
HANDSHAKE = render_request(
    "GET",
    "/webhooks/instagram?hub.mode=subscribe&hub.verify_token=test-verify-token&hub.challenge=42",
)
DESTINATION = "https://shop.example/lemon-loaf?ref=bench"


def seed(database_url: str, deliveries: int) -> list[int]:
    with psycopg.connect(database_url, autocommit=True) as conn:
        workspace = conn.execute(
            "INSERT INTO workspaces (name) VALUES ('bench') RETURNING id"
        ).fetchone()
        account = conn.execute(
            "INSERT INTO instagram_accounts (workspace_id, ig_user_id, username) "
            "VALUES (%s, '17841400000000001', 'bench_shop') RETURNING id",
            (workspace[0] if workspace else None,),
        ).fetchone()
        campaign = conn.execute(
            "INSERT INTO campaigns (workspace_id, account_id, name, status, scope, keywords, "
            "dm_text, buttons) VALUES (%s, %s, 'Bench', 'active', 'any_post', ARRAY['guide'], "
            "'Here: {link}', %s::jsonb) RETURNING id",
            (
                workspace[0] if workspace else None,
                account[0] if account else None,
                json.dumps([{"title": "Get it", "url": DESTINATION}]),
            ),
        ).fetchone()
        rows = conn.execute(
            "INSERT INTO dm_logs (workspace_id, account_id, campaign_id, trigger_kind, trigger_id,"
            " recipient_id, pr_state) SELECT %s, %s, %s, 'comment', 'c' || n, (10000 + n)::text,"
            " 'SENT' FROM generate_series(1, %s) AS n RETURNING id",
            (
                workspace[0] if workspace else None,
                account[0] if account else None,
                campaign[0] if campaign else None,
                deliveries,
            ),
        ).fetchall()
    return [row[0] for row in rows]


def click_requests(dm_log_ids: list[int]) -> list[bytes]:
    tracker_key = link_key(TEST_SECRET_KEY)
    requests = []
    for dm_log_id in dm_log_ids:
        url = LinkTracker("http://127.0.0.1", tracker_key, dm_log_id).track(0, DESTINATION)
        path = url.removeprefix("http://127.0.0.1")
        requests.append(render_request("GET", path, headers={"User-Agent": PHONE_UA}))
    return requests


def recorded_clicks(database_url: str) -> int:
    with psycopg.connect(database_url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM link_clicks WHERE visit = 'click'").fetchone()
    return int(row[0]) if row else 0


def _summary(result: LoadResult) -> dict[str, Any]:
    summary = result.summary()
    summary.pop("events", None)
    summary.pop("events_per_s", None)
    return summary


async def phases(
    port: int, requests: list[bytes], *, seconds: float, rate: float, connections: int
) -> dict[str, Any]:
    def click(index: int) -> tuple[bytes, int]:
        return requests[index % len(requests)], 0

    def handshake(_index: int) -> tuple[bytes, int]:
        return HANDSHAKE, 0

    warm = await closed_loop(port, click, connections=connections, duration_s=min(1.0, seconds))
    ceiling = await closed_loop(port, handshake, connections=connections, duration_s=seconds)
    maximum = await closed_loop(port, click, connections=connections, duration_s=seconds)
    steady = await open_loop(port, click, rate=rate, duration_s=seconds, connections=32)
    report: dict[str, Any] = {
        "warm_up": {"statuses": _summary(warm)["statuses"]},
        "ceiling": _summary(ceiling),
        "redirect_max": _summary(maximum),
        "redirect_steady": {"rate_per_s": rate, **_summary(steady)},
    }
    if ceiling.requests_per_s:
        report["ratio_to_ceiling"] = round(maximum.requests_per_s / ceiling.requests_per_s, 3)
    return report


def problems_in(report: dict[str, Any]) -> list[str]:
    found = []
    for phase in ("redirect_max", "redirect_steady"):
        statuses = report[phase]["statuses"]
        if set(statuses) != {"302"}:
            found.append(f"{phase}: answers other than 302: {statuses}")
    recorded = report["recorded"]
    if recorded["clicks_in_database"] != recorded["redirects_answered"]:
        found.append(f"clicks recorded {recorded['clicks_in_database']} times for "
                     f"{recorded['redirects_answered']} redirects")  # fmt: skip
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="a few seconds, for CI")
    parser.add_argument("--connections", type=int, default=16)
    args = parser.parse_args()
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass

    log_dir = Path(tempfile.mkdtemp(prefix="oncereply-bench-clicks-"))
    database = TestDatabase.create()
    redis_db = TestRedis.reserve()
    web: Service | None = None
    report: dict[str, Any] = {}
    try:
        database.migrate()
        dm_log_ids = seed(database.url, 200 if args.smoke else 2000)
        env = base_env(database.url, redis_db.url) | {
            "LOG_LEVEL": "WARNING",
            "CLICK_SPOOL_DIR": str(log_dir / "spool"),
        }
        port = free_port()
        web = start_web(env, port, log_dir)
        report = {
            "benchmark": "clicks",
            "mode": "smoke" if args.smoke else "full",
            "cpus": os.cpu_count(),
            "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        seconds, rate = (1.0, 200.0) if args.smoke else (8.0, 1000.0)
        report |= asyncio.run(
            phases(
                port,
                click_requests(dm_log_ids),
                seconds=seconds,
                rate=rate,
                connections=args.connections,
            )
        )
        answered = sum(
            report[phase]["statuses"].get("302", 0)
            for phase in ("warm_up", "redirect_max", "redirect_steady")
        )
        started = time.monotonic()
        # Progress, not a guess: wait until the copier has caught up (or plainly stopped).
        seen = {"count": -1, "since": time.monotonic()}

        def caught_up() -> bool:
            count = recorded_clicks(database.url)
            if count != seen["count"]:
                seen.update(count=count, since=time.monotonic())
            return count >= answered or time.monotonic() - seen["since"] > 30

        wait_until(caught_up, timeout=600, interval=0.2, what="the spooled clicks to be copied")
        report["recorded"] = {
            "redirects_answered": answered,
            "clicks_in_database": recorded_clicks(database.url),
            "copy_lag_s": round(time.monotonic() - started, 2),
        }
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
