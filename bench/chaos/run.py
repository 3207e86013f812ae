"""One chaos run from start to verdict: set up, make the comments under faults, wait for the
quiet, judge. See the package docstring for what it proves."""

from __future__ import annotations

import dataclasses
import os
import random
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from bench.chaos.balancer import Balancer
from bench.chaos.fleet import ROOT, Fleet
from bench.chaos.plan import (
    PlannedComment,
    Shape,
    message_faults,
    plan_comments,
    shape_for,
    webhook_faults,
)
from bench.chaos.progress import Snapshot, Watch
from bench.chaos.services import OwnPostgres, OwnRedis, Scratch, distinct_ports, run_as
from bench.chaos.verdict import Observed, Row, judge
from bench.chaos.world import ACCOUNT, World, build
from sandbox.client import SandboxAdmin
from tests.support.dashboard import sandbox_env, web_env_for
from tests.support.infra import alembic_upgrade, base_env
from tests.support.sandbox_process import SandboxProcess, start_sandbox

WORKERS = 3
WEBS = 2
KILL_EVERY_S = 20.0
TICK_S = 0.5
# A retry waits 5 or 15 minutes in production. The run pulls each waiting retry's time
# forward to a minute ago, so the due-work relay (every 30 s) picks it up: it stands for
# the wait having passed, and nothing else about the retry changes.
WARP_EVERY_S = 2.0
_WARP = """
UPDATE dm_logs SET pr_next_attempt_at = now() - interval '61 seconds'
WHERE pr_state = 'PENDING' AND pr_next_attempt_at > now() - interval '61 seconds'
RETURNING id
"""
_SNAPSHOT = """
SELECT pr_state, count(*),
       count(*) FILTER (WHERE pr_state = 'UNCONFIRMED'
                        AND NOT COALESCE(pr_evidence -> 'inbox_check' ? 'result', false)),
       max(updated_at)::text
FROM dm_logs WHERE trigger_kind = 'comment' GROUP BY 1
"""


@dataclass(frozen=True, slots=True)
class Size:
    comments: int
    per_post: int
    rate: float  # comments made per second
    send_timeout_s: float
    reconcile_interval_s: int
    quiet_s: float
    stall_s: float
    check_grace_s: float  # how long an UNCONFIRMED row may wait for its inbox check


FULL = Size(10_000, 200, 40.0, 3.0, 10, 15.0, 300.0, 60.0)
SMOKE = Size(300, 100, 25.0, 3.0, 10, 10.0, 240.0, 30.0)


class Poster(threading.Thread):
    """Fans comment at a steady rate, as the plan says; the comment ids, in order."""

    def __init__(self, base_url: str, world: World, planned: list[PlannedComment], rate: float):
        super().__init__(name="poster", daemon=True)
        self._admin = SandboxAdmin(base_url, timeout=60)
        self._world = world
        self._planned = planned
        self._rate = rate
        self.ids: list[str] = []
        self.error: str | None = None
        self.halt = threading.Event()

    def run(self) -> None:
        started = time.monotonic()
        try:
            for i, comment in enumerate(self._planned):
                pause = started + i / self._rate - time.monotonic()
                if pause > 0 and self.halt.wait(pause):
                    return
                if self.halt.is_set():
                    return
                made = self._admin.fan_comment(
                    self._world.fans[comment.fan], self._world.posts[comment.post], comment.text
                )
                self.ids.append(str(made["id"]))
        except Exception as exc:  # noqa: BLE001 - reported by the run
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            self._admin.close()


@dataclass
class Timeline:
    started: float = field(default_factory=time.monotonic)
    entries: list[str] = field(default_factory=list)

    def note(self, what: str) -> None:
        line = f"t+{time.monotonic() - self.started:.1f}s {what}"
        self.entries.append(line)
        print(f"chaos: {line}", file=sys.stderr, flush=True)


def snapshot(database_url: str, admin: SandboxAdmin) -> Snapshot:
    with psycopg.connect(database_url, autocommit=True, connect_timeout=5) as conn:
        rows = conn.execute(_SNAPSHOT).fetchall()
        ledger = conn.execute("SELECT count(*) FROM comments").fetchone()
    in_flight = admin.webhook_events(field="comments", status="sending")["in_flight"]
    return Snapshot(
        states={str(r[0]): int(r[1]) for r in rows},
        rows=sum(int(r[1]) for r in rows),
        unchecked_unconfirmed=sum(int(r[2]) for r in rows),
        ledger=int(ledger[0]) if ledger else 0,
        last_update=max((str(r[3]) for r in rows), default=""),
        webhooks_in_flight=int(in_flight),
    )


def warp(database_url: str) -> int:
    with psycopg.connect(database_url, autocommit=True, connect_timeout=5) as conn:
        return len(conn.execute(_WARP).fetchall())


def observe(database_url: str, admin: SandboxAdmin, comments: list[str]) -> Observed:
    """Our database and the sandbox's records, read separately."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        rows = {
            str(r[0]): Row(str(r[1]), r[2], bool(r[3]))
            for r in conn.execute(
                "SELECT trigger_id, pr_state, pr_message_id, "
                "COALESCE(pr_evidence -> 'inbox_check' ? 'result', false) "
                "FROM dm_logs WHERE trigger_kind = 'comment'"
            ).fetchall()
        }
        seen_via = {
            str(r[0]): str(r[1])
            for r in conn.execute("SELECT comment_id, first_seen_via FROM comments").fetchall()
        }
    delivered: dict[str, list[str]] = {}
    for message in admin.messages(account=ACCOUNT):
        if message.get("kind") == "private_reply" and message.get("comment_id"):
            delivered.setdefault(str(message["comment_id"]), []).append(str(message["mid"]))
    ours = set(comments)
    dropped: set[str] = set()
    given_up: set[str] = set()
    duplicated: set[str] = set()
    for event in admin.webhook_events(field="comments")["events"]:
        comment_id = str(event.get("comment_id") or (event.get("value") or {}).get("id"))
        if comment_id not in ours:
            continue
        if event["status"] == "dropped":
            dropped.add(comment_id)
        elif event["status"] == "failed":
            given_up.add(comment_id)
        if (event.get("copies") or 1) > 1:
            duplicated.add(comment_id)
    return Observed(
        comments=comments,
        rows=rows,
        delivered=delivered,
        seen_via=seen_via,
        dropped=dropped,
        given_up=given_up,
        duplicated=duplicated,
    )


_EXPLAIN = """
SELECT d.pr_state, d.pr_error_message, d.pr_message_id, d.pr_evidence::text, d.created_at::text,
       (SELECT json_agg(json_build_object('no', a.attempt_no, 'class', a.classification,
                'http', a.http_status, 'code', a.meta_code, 'subcode', a.meta_subcode,
                'error', left(a.error_message, 160), 'started', a.started_at::text,
                'finished', a.finished_at::text) ORDER BY a.id)
        FROM delivery_attempts a WHERE a.dm_log_id = d.id AND a.leg = 'private_reply')::text
FROM dm_logs d WHERE d.trigger_kind = 'comment' AND d.trigger_id = %s
"""


def explain(database_url: str, admin: SandboxAdmin, examples: dict[str, list[str]]) -> list[Any]:
    """For a few problem comments: our row and attempts, and the sandbox's send requests."""
    explained: list[Any] = []
    with psycopg.connect(database_url, autocommit=True) as conn:
        for problem, comment_ids in examples.items():
            for comment_id in comment_ids[:3]:
                row = conn.execute(_EXPLAIN, (comment_id,)).fetchone()
                requests = [
                    {k: r.get(k) for k in ("time", "status", "error", "fault", "delivered")}
                    for r in admin.requests(endpoint="messages", comment_id=comment_id)
                ]
                explained.append(
                    {"problem": problem, "comment": comment_id, "row": row, "sent": requests}
                )
    return explained


def add_faults(admin: SandboxAdmin, send_timeout_s: float) -> list[dict[str, Any]]:
    rules = [{"endpoint": "messages", **rule} for rule in message_faults(send_timeout_s)]
    rules += [{"endpoint": "webhook", **rule} for rule in webhook_faults()]
    for rule in rules:
        spec = {k: v for k, v in rule.items() if k != "share"}
        admin.add_fault(spec.pop("endpoint"), spec.pop("action"), **spec)
    admin.add_fault("messages", "latency", seconds=0.02, probability=0.2)
    return rules


def fault_hits(admin: SandboxAdmin) -> dict[str, int]:
    hits: Counter[str] = Counter()
    for rule in admin.faults():
        name = rule["action"]
        if rule.get("code"):
            name += f" {rule['code']}" + (f"/{rule['subcode']}" if rule.get("subcode") else "")
        hits[name] += int(rule.get("hits", 0))
    return dict(sorted(hits.items()))


@dataclass
class Stack:
    """Everything the run started, for the loop to act on and the end to stop."""

    scratch: Scratch
    postgres: OwnPostgres
    redis: OwnRedis
    database_url: str
    balancer: Balancer
    sandbox: SandboxProcess
    fleet: Fleet
    world: World


def start_stack(
    scratch: Scratch, size: Size, shape: Shape, tag: str, *, note: Callable[[str], None]
) -> Stack:
    # The balancer listens first; then every other port is chosen at once, all different.
    pg_port, redis_port, sandbox_port, *web_ports = distinct_ports(3 + WEBS)
    balancer = scratch.balancer = Balancer(web_ports).start()
    pg_folder = scratch.folder / "pg"
    pg_folder.mkdir()
    postgres = scratch.postgres = OwnPostgres(pg_folder, pg_port, run_as())
    postgres.init()
    postgres.start()
    note("PostgreSQL cluster started")
    redis_server = scratch.redis = OwnRedis(scratch.folder, redis_port)
    redis_server.start()
    database_url = postgres.create_database("oncereply_chaos")
    alembic_upgrade(database_url)
    note("migrated")
    env = base_env(database_url, redis_server.url)
    log_dir = logs_folder()
    sandbox = scratch.sandbox = start_sandbox(
        {
            **sandbox_env(env),
            "SANDBOX_WEBHOOK_CALLBACK_URL": f"{balancer.url}/webhooks/instagram",
            "SANDBOX_WEBHOOK_VERIFY_TOKEN": env["WEBHOOK_VERIFY_TOKEN"],
        },
        port=sandbox_port,
        log_dir=log_dir,
    )
    note("sandbox started")
    world = build(sandbox.admin, database_url, env["ENCRYPTION_KEY"], shape, tag)
    app_env = {
        **os.environ,
        **web_env_for(env, sandbox.base_url, balancer.url),
        "PRIVATE_REPLIES_PER_HOUR": "100000",
        "SEND_TIMEOUT_S": str(size.send_timeout_s),
        "RECONCILE_INTERVAL_S": str(size.reconcile_interval_s),
        "WORKER_CONCURRENCY": "16",
    }
    fleet = Fleet(scratch, app_env, log_dir, web_ports, WORKERS)
    note("world built")
    fleet.start()
    note("web processes answer")
    deadline = time.monotonic() + 120
    while not sandbox.admin.webhook().get("registered"):
        if time.monotonic() > deadline:
            raise RuntimeError("the sandbox could not verify the webhook callback")
        time.sleep(0.2)
    return Stack(scratch, postgres, redis_server, database_url, balancer, sandbox, fleet, world)


@dataclass
class Drive:
    """The run's loop: the faults it causes on schedule, and when it is over."""

    stack: Stack
    size: Size
    poster: Poster
    comments: int
    timeline: Timeline
    commenting: float  # when the first comment was made
    warped: int = 0
    _next_kill: float | None = None
    _redis_done: bool = False
    _postgres_done: bool = False
    _last_warp: float = 0.0
    _current: Snapshot = field(default_factory=Snapshot)

    def until_over(self) -> str:
        watch = Watch(self.size.quiet_s, self.size.stall_s, self.size.check_grace_s)
        while True:
            self._faults(time.monotonic(), len(self.poster.ids))
            try:
                now = time.monotonic()
                if now - self._last_warp >= WARP_EVERY_S:
                    self.warped += warp(self.stack.database_url)
                    self._last_warp = now
                self._current = snapshot(self.stack.database_url, self.stack.sandbox.admin)
            except psycopg.OperationalError:
                time.sleep(TICK_S)
                continue
            if not self.poster.is_alive():
                if self.poster.error:
                    raise RuntimeError(f"making comments failed: {self.poster.error}")
                ending = watch.verdict(self._current, self.comments, time.monotonic())
                if ending is not None:
                    return ending
            time.sleep(TICK_S)

    def _faults(self, now: float, posted: int) -> None:
        fleet, n = self.stack.fleet, self.comments
        for what in fleet.supervise():
            self.timeline.note(f"restarted after an unplanned exit: {what}")
        active = self.poster.is_alive() or not self._current.settled(n)
        if self._next_kill is None:
            due = posted >= n // 4 or now - self.commenting >= KILL_EVERY_S
        else:
            due = now >= self._next_kill
        if active and due:
            self.timeline.note(f"SIGKILL {fleet.kill_one()}; started again")
            self._next_kill = now + KILL_EVERY_S
        if not self._redis_done and posted >= (2 * n) // 5:
            down = self.stack.redis.restart()
            self._redis_done = True
            self.timeline.note(f"Redis restarted empty ({down:.1f} s down)")
        if not self._postgres_done and posted >= (7 * n) // 10:
            down = self.stack.postgres.restart()
            self._postgres_done = True
            self.timeline.note(f"PostgreSQL restarted, immediate shutdown ({down:.1f} s down)")


def report(stack: Stack, drive: Drive, ending: str, rules: list[dict[str, Any]]) -> dict[str, Any]:
    admin = stack.sandbox.admin
    verdict = judge(observe(stack.database_url, admin, drive.poster.ids))
    events = admin.webhook_events(field="comments")["events"]
    result = {
        "benchmark": "chaos",
        "comments": verdict["comments"],
        "webhooks_sent": sum(1 for e in events if e["status"] != "dropped"),
        **{key: verdict[key] for key in ("webhooks_duplicated", "webhooks_dropped")},
        "recovered_by_reconciler": verdict["recovered_by_reconciler"],
        "worker_kills": stack.fleet.kills,
        "redis_restarts": stack.redis.restarts,
        "postgres_restarts": stack.postgres.restarts,
        **{
            key: verdict[key]
            for key in (
                "duplicates",
                "lost",
                "not_final",
                "false_sent",
                "failed_delivered",
                "unconfirmed",
                "unconfirmed_delivered",
                "unconfirmed_unchecked",
                "unconfirmed_missed_by_check",
            )
        },
        "seconds": round(time.monotonic() - drive.timeline.started, 1),
        "ok": verdict["ok"] and ending == "quiet",
        "ended": ending,
        "final_states": verdict["final_states"],
        "private_replies_delivered": verdict["private_replies_delivered"],
        "webhooks_given_up": verdict["webhooks_given_up"],
        "seen_first_by_poll": verdict["seen_first_by_poll"],
        "webhook_posts_by_web_process": stack.balancer.by_backend(),
        "webhook_posts_unreachable": sum(stack.balancer.unreachable.values()),
        "unplanned_exits": stack.fleet.unplanned_exits,
        "retry_waits_skipped": drive.warped,
        "faults": rules,
        "fault_hits": fault_hits(admin),
        "timeline": drive.timeline.entries,
        "examples": verdict["examples"],
    }
    if not result["ok"]:
        result["logs"] = str(logs_folder())
    if not result["ok"] or verdict["unconfirmed"]:
        examples = {**verdict["examples"], **verdict["unconfirmed_examples"]}
        result["explained"] = explain(stack.database_url, admin, examples)
    return result


def run(size: Size, seed_value: int) -> dict[str, Any]:
    shape = shape_for(size.comments, size.per_post)
    planned = plan_comments(shape, random.Random(seed_value))
    timeline = Timeline()
    log_dir = logs_folder()
    log_dir.mkdir(parents=True, exist_ok=True)
    scratch = Scratch()
    poster: Poster | None = None
    try:
        stack = start_stack(scratch, size, shape, f"chaos{seed_value}", note=timeline.note)
        rules = add_faults(stack.sandbox.admin, size.send_timeout_s)
        timeline.note(f"ready: {shape.posts} posts, {shape.fans} fans; commenting")
        commenting = time.monotonic()
        poster = Poster(stack.sandbox.base_url, stack.world, planned, size.rate)
        poster.start()
        drive = Drive(stack, size, poster, len(planned), timeline, commenting)
        ending = drive.until_over()
        timeline.note(f"{ending}; judging")
        result = report(stack, drive, ending, rules)
        result |= {"seed": seed_value, "shape": dataclasses.asdict(shape), "rate_per_s": size.rate}
        return result
    finally:
        if poster is not None:
            poster.halt.set()
            poster.join(timeout=70)
        scratch.close()


def logs_folder() -> Path:
    """Where this run's processes write their logs."""
    return ROOT / "test-results" / "chaos" / str(os.getpid())
