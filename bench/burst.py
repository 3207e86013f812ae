"""Viral-surge benchmark: a burst of comments drained through the hourly private-reply budget.

    uv run python -m bench.burst            # 50,000 comments, 750 per 10 s (about 15 minutes)
    uv run python -m bench.burst --smoke    # 2,000 comments, 100 per 1 s (under a minute)

N comments from N distinct fans on one post of one account are made in the sandbox at the
arrival rate of a viral post (`--rate` per second); the sandbox sends them as signed webhooks
to a real web process, and `--workers` worker processes ingest and deliver them. The budget's
window is compressed (`PRIVATE_REPLY_WINDOW_S`, a setting only tests and benchmarks use), so
a backlog that takes Meta's cap days to drain takes minutes. The sandbox's own limits are
lifted: the cap measured is ours. Prints one JSON object:

- `comments`; `ingest_seconds`: from the first comment made to the last one in the ledger
  (the arrivals alone span `comments / rate` seconds); `ingest_lag_max_s` and
  `ingest_lag_p99_s`: from a comment's webhook reaching the web to its ledger row, the most
  and the 99th percentile (target: all within 60 s, whatever the backlog);
- `delivered` (SENT), `expired` (SKIPPED_WINDOW_EXPIRED), `states` (an UNCONFIRMED row is
  final too: a send whose answer was lost, looked for in the inbox afterwards);
- `max_sends_in_window`: the most private replies the sandbox received in any rolling window
  of `window_seconds` (must be ≤ `window_cap`);
- `job_runs_per_delivery`: job executions of any kind (ingest, deliveries, the pacer, crons)
  counted in the worker processes, divided by `delivered` (target ≤ 1.5), and `job_runs` by
  job name;
- `max_reorder`: for a comment, how many comments made after it were sent before it; the
  most over all comments (target ≤ one pacer batch, `pacer_batch`);
- `duplicates`: private replies beyond one per comment (must be 0);
- `worker_peak_rss_mb`: the largest peak RSS of the worker processes;
- `worker_cpu_ms_per_delivery`: the worker processes' CPU time, start-up, ingest, the pacer
  and crons included, per delivery; `redis`: their Redis round trips and commands per
  delivery, counted at redis-py's connection (`bench/redis_calls.py`);
- `redis_peak_mb`: the Redis server's peak `used_memory` during the run less its value at the
  start (the server is shared, so other tenants' use is in it too);
- `seconds`: the whole run; `ok`: every answer right (every row final, nothing twice, the cap
  held). Targets are reported, never failed on. `sends_per_window`: private replies per
  window from the first comment on.

`--public`: the campaign also posts a public reply under each comment, after its DM (the
default), through its own hourly budget (`--public-cap` per window, default the private cap).
The report adds `public`: replies posted and their states, the most in any window
(`max_public_in_window`, must be ≤ `public_cap`), replies beyond one per comment
(`duplicates`, must be 0), replies posted before their comment's DM (`before_dm`, must be 0),
and `job_runs_per_send` (job executions per DM or public reply delivered). Every row's public
leg must be final too.

`--throttle`: the variant where Meta refuses for a while mid-run. From `--throttle-at` seconds
after the first comment, for `--throttle-for` seconds, the sandbox allows only
`--throttle-rate` sends a second and answers the rest code 4 with its usage headers; the
report adds `throttle` (the stretch, the refusals, the pacer's `pace_*` operational events),
and `sends_per_window` shows the pace drop and recover. A refused reply waits for the
account's pacer again, earliest deadline first.
"""

from __future__ import annotations

import argparse
import bisect
import dataclasses
import json
import os
import resource
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, cast

import psycopg
import redis

from bench.burst_trace import JobTrace, diagnose, overtaken, read_sent_rows
from bench.deliver import MEDIA_ID, seed
from bench.redis_calls import count_redis, redis_figures
from sandbox.client import SandboxAdmin
from tests.support.dashboard import sandbox_env, web_env_for
from tests.support.infra import TestDatabase, TestRedis, base_env
from tests.support.processes import Service, free_port, start_web, wait_until, worker_beating
from tests.support.sandbox_process import start_sandbox

LOG_DIR = Path(tempfile.gettempdir()) / "oncereply-bench"
QUEUE = "bench-burst"
ACCOUNT = "sunny.bakes"
# No progress (a comment ingested or a row settled) for this long fails the run; longer than
# the five minutes a refusal for a rate limit waits before its retry.
STALL_S = 420.0


@dataclasses.dataclass(frozen=True)
class Size:
    comments: int
    cap: int
    window_s: float
    rate: float
    workers: int


@dataclasses.dataclass(frozen=True)
class Public:
    """Public replies on, with their own cap per window."""

    cap: int


@dataclasses.dataclass(frozen=True)
class Throttling:
    at_s: float
    for_s: float
    sends_per_s: int


class _Throttler(threading.Thread):
    """Meta's per-second limit, lowered for a stretch of the run, then lifted again."""

    def __init__(self, base_url: str, plan: Throttling, started: float) -> None:
        super().__init__(daemon=True)
        self.plan, self.started = plan, started
        self._admin = SandboxAdmin(base_url, timeout=60)

    def run(self) -> None:
        time.sleep(max(0.0, self.started + self.plan.at_s - time.time()))
        self._admin.update_settings(sends_per_second=self.plan.sends_per_s)
        time.sleep(self.plan.for_s)
        self._admin.update_settings(sends_per_second=10**9)
        self._admin.close()


FULL = Size(comments=50_000, cap=750, window_s=10.0, rate=250.0, workers=2)
# Small enough for `make test` on a shared two-core machine, with a cap set below what two
# workers deliver there, so the backlog and its pacer are exercised.
SMOKE = Size(comments=2_000, cap=100, window_s=1.0, rate=400.0, workers=2)


def _parallel(count: int, threads: int, work: Any) -> None:
    """Run `work(admin, i)` for i in range(count) over `threads` sandbox clients."""

    def run(part: int, admin: SandboxAdmin) -> None:
        try:
            for i in range(part, count, threads):
                work(admin, i)
        finally:
            admin.close()

    base = work.base_url
    workers = [
        threading.Thread(target=run, args=(k, SandboxAdmin(base, timeout=60)))
        for k in range(threads)
    ]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join()


class _AddFans:
    def __init__(self, base_url: str, names: list[str]) -> None:
        self.base_url, self.names = base_url, names

    def __call__(self, admin: SandboxAdmin, i: int) -> None:
        admin.add_fan(self.names[i])


class _Comment:
    """Fan i comments when it is due at the steady rate."""

    def __init__(self, base_url: str, names: list[str], rate: float, started: float) -> None:
        self.base_url, self.names, self.rate, self.started = base_url, names, rate, started

    def __call__(self, admin: SandboxAdmin, i: int) -> None:
        pause = self.started + i / self.rate - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        admin.fan_comment(self.names[i], MEDIA_ID, "RECIPE please")


class _RedisPeak(threading.Thread):
    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self._client = redis.Redis.from_url(url)
        self.baseline = self._used()
        self.peak = self.baseline
        self._done = threading.Event()

    def _used(self) -> int:
        info = cast("dict[str, Any]", self._client.info("memory"))
        return int(info["used_memory"])

    def run(self) -> None:
        while not self._done.wait(0.5):
            self.peak = max(self.peak, self._used())

    def stop(self) -> float:
        self._done.set()
        self.join()
        self.peak = max(self.peak, self._used())
        self._client.close()
        return (self.peak - self.baseline) / 2**20


# The fans' comments, not the account's own public replies under them (also in the ledger).
_FANS_COMMENTS = "SELECT count(*) FROM comments WHERE parent_id IS NULL"
# Each private leg's state, and the public legs still to post (one waiting for a DM that was
# not SENT waits for it, as the campaign asks, and is not counted).
_STATES = """
SELECT pr_state,
       count(*) FILTER (WHERE pub_state IN ('PENDING', 'IN_FLIGHT') AND pr_state = 'SENT'),
       count(*)
FROM dm_logs GROUP BY 1
"""


def _wait_for_progress(database_url: str, total: int, size: Size) -> tuple[float, dict[str, int]]:
    """Until every comment is in the ledger and every row is final (both legs); fails after
    STALL_S without progress. Returns (epoch when the last comment reached the ledger, the
    private legs' states)."""
    ingested_at = 0.0
    last, last_change = (-1, -1, -1), time.monotonic()
    with psycopg.connect(database_url, autocommit=True) as conn:
        while True:
            (comments,) = conn.execute(_FANS_COMMENTS).fetchone() or (0,)
            rows = conn.execute(_STATES).fetchall()
            states: dict[str, int] = {state: n for state, _, n in rows}
            public_open = sum(n for _, n, _ in rows)
            if comments >= total and not ingested_at:
                row = conn.execute(
                    "SELECT extract(epoch FROM max(created_at)) FROM comments "
                    "WHERE parent_id IS NULL"
                )
                ingested_at = float((row.fetchone() or (0,))[0])
            open_rows = states.get("PENDING", 0) + states.get("IN_FLIGHT", 0)
            settled = sum(states.values()) >= total and open_rows == public_open == 0
            if comments >= total and settled:
                return ingested_at, states
            progress = (comments, sum(states.values()) - open_rows, public_open)
            if int(time.monotonic()) % 10 == 0:
                print(
                    f"burst: {comments} comments, {states}, {public_open} public open",
                    file=sys.stderr,
                    flush=True,
                )
            if progress != last:
                last, last_change = progress, time.monotonic()
            elif time.monotonic() - last_change > STALL_S:
                raise TimeoutError(f"no progress for {STALL_S} s: {comments} comments, {states}")
            time.sleep(0.5)


def max_in_window(times: list[float], window_s: float) -> int:
    """The most of `times` in any half-open window [t, t + window_s)."""
    ordered = sorted(times)
    most = 0
    for i, start in enumerate(ordered):
        most = max(most, bisect.bisect_left(ordered, start + window_s) - i)
    return most


def max_reorder(made_sent: list[tuple[float, float]]) -> int:
    """For each comment, how many comments made strictly later were sent strictly earlier; the
    most over all comments (`burst_trace.overtaken` counts it per comment)."""
    counts = overtaken([(i, made, sent) for i, (made, sent) in enumerate(made_sent)])
    return max(counts.values(), default=0)


def sends_per_window(times: list[float], window_s: float, started: float) -> list[int]:
    counts: Counter[int] = Counter(int((t - started) // window_s) for t in times)
    return [counts.get(k, 0) for k in range(max(counts, default=-1) + 1)]


def run(
    size: Size,
    throttling: Throttling | None = None,
    public: Public | None = None,
    *,
    trace: bool = False,
) -> dict[str, Any]:
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    database = TestDatabase.create()
    redis_db = TestRedis.reserve()
    web_port = free_port()
    started_run = time.monotonic()
    counts_files = [LOG_DIR / f"burst-counts-{os.getpid()}-{k}.json" for k in range(size.workers)]
    trace_files = [LOG_DIR / f"burst-trace-{os.getpid()}-{k}.json" for k in range(size.workers)]
    try:
        database.migrate()
        env = base_env(database.url, redis_db.url)
        sandbox_extra = {
            **sandbox_env(env),
            "SANDBOX_WEBHOOK_CALLBACK_URL": f"http://127.0.0.1:{web_port}/webhooks/instagram",
            "SANDBOX_WEBHOOK_VERIFY_TOKEN": env["WEBHOOK_VERIFY_TOKEN"],
        }
        with start_sandbox(sandbox_extra, log_dir=LOG_DIR) as sandbox:
            admin = sandbox.admin
            names = _seed_world(
                sandbox.base_url,
                admin,
                database_url=database.url,
                env=env,
                size=size,
                public=public,
            )
            app_env = {
                **web_env_for(env, sandbox.base_url, f"http://127.0.0.1:{web_port}"),
                "PRIVATE_REPLIES_PER_HOUR": str(size.cap),
                "PRIVATE_REPLY_WINDOW_S": str(size.window_s),
                "QUEUE_NAME": QUEUE,
                "PUBLIC_REPLIES_PER_HOUR": str(public.cap if public is not None else size.cap),
            }
            web = start_web(app_env, web_port, LOG_DIR)
            workers = [
                Service(
                    f"burst-worker-{k}",
                    ["-m", "bench.burst", "--worker-process"],
                    {
                        **app_env,
                        "BENCH_COUNTS_FILE": str(counts_files[k]),
                        "BENCH_TRACE_FILE": str(trace_files[k]) if trace else "",
                    },
                    LOG_DIR / f"burst-worker-{os.getpid()}-{k}.log",
                ).start()
                for k in range(size.workers)
            ]
            peak = _RedisPeak(redis_db.url)
            try:
                workers[0].wait_until_ready(
                    lambda: worker_beating(web_port), what="a worker heartbeat"
                )
                wait_until(
                    lambda: bool(admin.webhook().get("registered")),
                    timeout=60,
                    what="the sandbox to verify its webhook callback",
                )
                peak.start()
                first_comment_at = time.time()
                if throttling is not None:
                    _Throttler(sandbox.base_url, throttling, first_comment_at).start()
                _parallel(
                    size.comments,
                    8,
                    _Comment(sandbox.base_url, names, size.rate, time.monotonic()),
                )
                ingested_at, states = _wait_for_progress(database.url, size.comments, size)
            finally:
                for worker in workers:
                    worker.stop(timeout=60)
                web.stop()
                redis_mb = peak.stop() if peak.is_alive() else 0.0
            messages = [m for m in admin.messages(account=ACCOUNT) if m.get("comment_id")]
            replies = admin.replies(account=ACCOUNT) if public is not None else []
        throttle_seen, lag, public_states, made_sent = _read_outcome(database.url, first_comment_at)
        sent_rows = read_sent_rows(database.url) if trace else []
    finally:
        redis_db.release()
        database.drop()
    counted = [json.loads(f.read_text()) for f in counts_files if f.exists()]
    result = _report(
        size,
        Observed(
            first_comment_at=first_comment_at,
            ingested_at=ingested_at,
            states=states,
            messages=messages,
            made_sent=made_sent,
            counted=counted,
            redis_mb=redis_mb,
            seconds=time.monotonic() - started_run,
            ingest_lag_s=lag,
        ),
    )
    if throttling is not None:
        result["throttle"] = {**dataclasses.asdict(throttling), **throttle_seen}
    if public is not None:
        result["public"] = _public_report(
            size,
            public=public,
            result=result,
            messages=messages,
            replies=replies,
            states=public_states[0],
            held_for_dm=public_states[1],
        )
        result["ok"] = result["ok"] and result["public"]["ok"]
    if trace:
        result["reorder_diagnosis"] = diagnose(
            sent_rows, trace_files, size.cap, first_comment_at, messages
        )
    return result


def _read_outcome(
    database_url: str, first_comment_at: float
) -> tuple[
    dict[str, Any], tuple[float, float], tuple[dict[str, int], int], list[tuple[float, float]]
]:
    """What the database says once the run is over: the throttling seen, the ingest lag, the
    public legs' states (and how many wait for a DM not SENT) and each sent comment's (made,
    sent) times."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        throttle_seen = {
            "refused_code_4": (
                conn.execute(
                    "SELECT count(*) FROM delivery_attempts WHERE meta_code = 4"
                ).fetchone()
                or (0,)
            )[0],
            "pace_events": [
                {"at_s": round(float(at) - first_comment_at, 1), "kind": kind, "message": m}
                for at, kind, m in conn.execute(
                    "SELECT extract(epoch FROM created_at), kind, message "
                    "FROM operational_events WHERE source = 'pacer' ORDER BY id"
                ).fetchall()
            ],
        }
        lag_max, lag_p99 = conn.execute(_INGEST_LAG).fetchone() or (None, None)
        public_states: dict[str, int] = dict(
            conn.execute(
                "SELECT pub_state, count(*) FROM dm_logs WHERE pub_state IS NOT NULL GROUP BY 1"
            ).fetchall()
        )
        (held_for_dm,) = conn.execute(
            "SELECT count(*) FROM dm_logs WHERE pub_state = 'PENDING' AND pr_state <> 'SENT'"
        ).fetchone() or (0,)
        made_sent = [
            (float(made), float(sent))
            for made, sent in conn.execute(
                "SELECT extract(epoch FROM deadline_at), extract(epoch FROM pr_sent_at) "
                "FROM dm_logs WHERE pr_state = 'SENT'"
            ).fetchall()
        ]
    lag = (float(lag_max or 0.0), float(lag_p99 or 0.0))
    return throttle_seen, lag, (public_states, int(held_for_dm)), made_sent


def _seed_world(
    base_url: str,
    admin: SandboxAdmin,
    *,
    database_url: str,
    env: dict[str, str],
    size: Size,
    public: Public | None,
) -> list[str]:
    """The account with its token and campaign (a public reply too, for `--public`), the
    sandbox's own limits lifted, and the fans who will comment: their names."""
    admin.update_settings(sends_per_second=10**9, private_replies_per_hour=10**9)
    token = admin.mint_token(ACCOUNT, age_seconds=2 * 86400, subscribe=["comments", "messages"])[
        "access_token"
    ]
    _, _, campaign = seed(database_url, token, env["ENCRYPTION_KEY"])
    _with_public_reply(database_url, campaign, public)
    names = [f"surge.fan{i}" for i in range(size.comments)]
    _parallel(size.comments, 8, _AddFans(base_url, names))
    return names


def _with_public_reply(database_url: str, campaign: int, public: Public | None) -> None:
    if public is None:
        return
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(
            "UPDATE campaigns SET public_reply_enabled = true, "
            "public_replies = '{\"Thank you, sent you a DM!\"}' WHERE id = %s",
            (campaign,),
        )


def _public_report(
    size: Size,
    *,
    public: Public,
    result: dict[str, Any],
    messages: list[dict[str, Any]],
    replies: list[dict[str, Any]],
    states: dict[str, int],
    held_for_dm: int,
) -> dict[str, Any]:
    """The public replies: how many, within their cap, once each, never before their DM."""
    per_comment = Counter(r["comment_id"] for r in replies)
    dm_at = {m["comment_id"]: float(m["time"]) for m in messages}
    before_dm = sum(
        1
        for r in replies
        if r["comment_id"] not in dm_at or float(r["time"]) < dm_at[r["comment_id"]]
    )
    posted = states.get("SENT", 0)
    runs = sum(result["job_runs"].values())
    # A reply waiting for a DM that was not SENT (UNCONFIRMED) is not posted, by design.
    open_legs = states.get("IN_FLIGHT", 0) + states.get("PENDING", 0) - held_for_dm
    report: dict[str, Any] = {
        "public_cap": public.cap,
        "posted": posted,
        "states": states,
        "held_for_dm": held_for_dm,
        "max_public_in_window": max_in_window([float(r["time"]) for r in replies], size.window_s),
        "duplicates": sum(n - 1 for n in per_comment.values() if n > 1),
        "before_dm": before_dm,
        "job_runs_per_send": round(runs / max(result["delivered"] + posted, 1), 3),
    }
    report["ok"] = (
        open_legs == 0
        and report["duplicates"] == 0
        and before_dm == 0
        and report["max_public_in_window"] <= public.cap
        and posted <= len(per_comment)
    )
    return report


@dataclasses.dataclass(frozen=True)
class Observed:
    first_comment_at: float
    ingested_at: float
    states: dict[str, int]
    messages: list[dict[str, Any]]
    made_sent: list[tuple[float, float]]
    counted: list[dict[str, Any]]
    redis_mb: float
    seconds: float
    # (most, 99th percentile) seconds from a webhook's arrival to its comment in the ledger
    ingest_lag_s: tuple[float, float] = (0.0, 0.0)


# How long each comment took from its webhook's arrival at the web to the ledger.
_INGEST_LAG = """
SELECT max(lag), percentile_cont(0.99) WITHIN GROUP (ORDER BY lag)
FROM (SELECT extract(epoch FROM c.created_at - w.received_at) AS lag
      FROM comments c JOIN webhook_events w ON w.id = c.webhook_event_id
      WHERE c.parent_id IS NULL) lags
"""


def _report(size: Size, seen: Observed) -> dict[str, Any]:
    from app.delivery.send.budget import batch_size

    states, counted, messages = seen.states, seen.counted, seen.messages
    runs: Counter[str] = Counter()
    for count in counted:
        runs.update(count.get("jobs", {}))
    delivered = states.get("SENT", 0)
    per_comment = Counter(m["comment_id"] for m in messages)
    duplicates = sum(n - 1 for n in per_comment.values() if n > 1)
    times = [float(m["time"]) for m in messages]
    most = max_in_window(times, size.window_s)
    expired = states.get("SKIPPED_WINDOW_EXPIRED", 0)
    final = sum(states.values()) - states.get("PENDING", 0) - states.get("IN_FLIGHT", 0)
    result: dict[str, Any] = {
        "benchmark": "burst",
        "comments": size.comments,
        "arrival_rate_per_s": size.rate,
        "workers": size.workers,
        "ingest_seconds": round(seen.ingested_at - seen.first_comment_at, 2),
        "ingest_lag_max_s": round(seen.ingest_lag_s[0], 2),
        "ingest_lag_p99_s": round(seen.ingest_lag_s[1], 2),
        "delivered": delivered,
        "expired": expired,
        "states": states,
        "max_sends_in_window": most,
        "window_cap": size.cap,
        "window_seconds": size.window_s,
        "job_runs_per_delivery": round(sum(runs.values()) / max(delivered, 1), 3),
        "job_runs": dict(runs),
        "max_reorder": max_reorder(seen.made_sent),
        "pacer_batch": batch_size(size.cap),
        "duplicates": duplicates,
        "worker_peak_rss_mb": max((c.get("peak_rss_mb", 0.0) for c in counted), default=None),
        # Every job of the workers, ingest, the pacer and crons included, per delivery.
        "worker_cpu_ms_per_delivery": round(
            1000 * sum(c.get("cpu_s", 0.0) for c in counted) / max(delivered, 1), 2
        ),
        "redis": redis_figures(
            sum((Counter(c.get("redis", {})) for c in counted), Counter()), max(delivered, 1)
        ),
        "redis_peak_mb": round(seen.redis_mb, 1),
        "seconds": round(seen.seconds, 1),
        "targets": {
            "job_runs_per_delivery": 1.5,
            "max_reorder": batch_size(size.cap),
            "ingest_lag_max_s": 60,
        },
    }
    per_window = sends_per_window(times, size.window_s, seen.first_comment_at)
    result["sends_per_window"] = per_window if len(per_window) <= 120 else "(over 120 windows)"
    sent_rows = delivered + states.get("UNCONFIRMED", 0)
    result["ok"] = (
        final == size.comments
        and duplicates == 0
        and most <= size.cap
        and delivered <= len(per_comment) <= sent_rows
    )
    return result


def worker_process() -> int:
    """`--worker-process`: the product's worker (crons included), counting every job it runs
    and reporting its peak RSS when it stops."""
    from app.jobs.registry import JOBS
    from app.logs import configure_logging
    from app.settings import load_settings
    from worker.runner import build_worker, run_in_worker_loop

    jobs: Counter[str] = Counter()
    calls: Counter[str] = Counter()
    count_redis(calls)
    trace = JobTrace() if os.environ.get("BENCH_TRACE_FILE") else None
    configure_logging("WARNING")
    built = build_worker(load_settings(), jobs=list(JOBS))

    async def count_job(ctx: dict[str, Any]) -> None:
        job = ctx.get("job")
        jobs[str(getattr(job, "function", "?"))] += 1
        if trace is not None:
            trace.note(job)

    built.add_after_process(count_job)
    try:
        run_in_worker_loop(built.start())
    finally:
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        Path(os.environ["BENCH_COUNTS_FILE"]).write_text(
            json.dumps(
                {
                    "jobs": jobs,
                    "peak_rss_mb": round(peak_mb, 1),
                    "cpu_s": time.process_time(),
                    "redis": calls,
                }
            )
        )
        if trace is not None:
            trace.write(Path(os.environ["BENCH_TRACE_FILE"]))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--smoke", action="store_true", help="2,000 comments, under a minute")
    parser.add_argument("--n", type=int, help="comments (default 50,000)")
    parser.add_argument("--cap", type=int, help="private replies per window (default 750)")
    parser.add_argument("--window", type=float, help="the compressed window, seconds")
    parser.add_argument("--rate", type=float, help="comments made per second")
    parser.add_argument("--workers", type=int, help="worker processes")
    parser.add_argument("--throttle", action="store_true", help="Meta refuses for a while")
    parser.add_argument("--throttle-at", type=float, default=60.0, help="seconds in")
    parser.add_argument("--throttle-for", type=float, default=30.0, help="seconds long")
    parser.add_argument("--throttle-rate", type=int, default=5, help="sends a second allowed")
    parser.add_argument("--public", action="store_true", help="a public reply under each comment")
    parser.add_argument("--public-cap", type=int, help="public replies per window (default --cap)")
    parser.add_argument(
        "--trace",
        action="store_true",
        help="add `reorder_diagnosis`: how the comments sent out of order were sent",
    )
    parser.add_argument("--worker-process", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker_process:
        return worker_process()
    size = SMOKE if args.smoke else FULL
    size = dataclasses.replace(
        size,
        **{
            name: value
            for name, value in (
                ("comments", args.n),
                ("cap", args.cap),
                ("window_s", args.window),
                ("rate", args.rate),
                ("workers", args.workers),
            )
            if value is not None
        },
    )
    throttling = (
        Throttling(args.throttle_at, args.throttle_for, args.throttle_rate)
        if args.throttle
        else None
    )
    public = Public(args.public_cap or size.cap) if args.public else None
    result = run(size, throttling, public, trace=args.trace)
    print(json.dumps(result, indent=2, default=str))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
