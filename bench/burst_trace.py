"""bench.burst `--trace`: which comments were sent out of order, and how.

The worker processes note every delivery and pacer job they run (`JobTrace`, written beside
the job counts when the process stops); after the run, `diagnose` joins those notes with each
row's send time and says, for the comments most overtaken, whose job sent them (one the pacer
granted, or the row's own), how long that job waited in the queue, and what the row's earlier
jobs found. Only the benchmark uses this; the product is not changed by it.
"""

from __future__ import annotations

import json
import time
from collections import Counter, defaultdict
from itertools import pairwise
from pathlib import Path
from typing import Any

import psycopg

# What is noted of each job: (function, row or account id, grant, queued ms, started ms,
# finished ms, result).
Note = tuple[str, int | None, int | None, int, int, int, Any]

_TRACED = {"process_comment", "pace_account", "verify_unconfirmed"}
_SENT_ROWS = """
SELECT id, extract(epoch FROM deadline_at - interval '7 days'), extract(epoch FROM pr_sent_at),
       extract(epoch FROM created_at), pr_attempts, trigger_id
FROM dm_logs WHERE pr_state = 'SENT'
"""


class JobTrace:
    """Notes the delivery and pacer jobs a worker process runs (its SAQ after-process hook)."""

    def __init__(self) -> None:
        self.notes: list[Note] = []

    def note(self, job: Any) -> None:
        function = str(getattr(job, "function", "?"))
        if function not in _TRACED:
            return
        kwargs = getattr(job, "kwargs", None) or {}
        subject = kwargs.get("dm_log_id", kwargs.get("account_id"))
        self.notes.append(
            (
                function,
                subject,
                kwargs.get("grant"),
                int(getattr(job, "queued", 0) or 0),
                int(getattr(job, "started", 0) or 0),
                int(time.time() * 1000),
                getattr(job, "result", None),
            )
        )

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(self.notes, default=str))


def overtaken(rows: list[tuple[int, float, float]]) -> dict[int, int]:
    """For each row (id, made, sent): how many rows made strictly later were sent strictly
    earlier (the quantity `max_reorder` takes the most of)."""
    made_values = sorted({made for _, made, _ in rows})
    rank = {value: i + 1 for i, value in enumerate(made_values)}
    tree = [0] * (len(made_values) + 1)

    def add(i: int) -> None:
        while i < len(tree):
            tree[i] += 1
            i += i & -i

    def upto(i: int) -> int:
        total = 0
        while i > 0:
            total += tree[i]
            i -= i & -i
        return total

    counts: dict[int, int] = {}
    by_sent = sorted(rows, key=lambda row: row[2])
    seen, i = 0, 0
    while i < len(by_sent):
        j = i
        while j < len(by_sent) and by_sent[j][2] == by_sent[i][2]:
            j += 1
        for row_id, made, _ in by_sent[i:j]:
            counts[row_id] = seen - upto(rank[made])
        for _, made, _ in by_sent[i:j]:
            add(rank[made])
        seen += j - i
        i = j
    return counts


def _private(result: Any) -> str:
    if isinstance(result, dict):
        return str(result.get("private"))
    return str(result)


def read_sent_rows(database_url: str) -> list[dict[str, Any]]:
    """Every SENT row: when its comment was made (its 7-day deadline less 7 days), sent and
    written to the ledger (epoch seconds), and how many attempts it took."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        rows = conn.execute(_SENT_ROWS).fetchall()
    return [
        {
            "id": i,
            "made": float(m),
            "sent": float(s),
            "created": float(c),
            "attempts": a,
            "comment_id": comment_id,
        }
        for i, m, s, c, a, comment_id in rows
    ]


def diagnose(
    rows: list[dict[str, Any]],
    trace_files: list[Path],
    cap: int,
    started: float,
    messages: list[dict[str, Any]],
) -> dict[str, Any]:
    """`rows` from `read_sent_rows`, `messages` the sandbox's private replies. Summarises the
    rows overtaken by more than one pacer batch of the `cap` and shows the worst ten; the
    reorder is also counted by when the sandbox received each reply (rather than when the row
    was recorded SENT), which tells a late send from a late record."""
    from app.delivery.send.budget import batch_size

    batch = batch_size(cap)
    notes: list[Note] = []
    for path in trace_files:
        if path.exists():
            notes += [tuple(n) for n in json.loads(path.read_text())]
    jobs_of: dict[int, list[Note]] = defaultdict(list)
    pacer_runs: list[Note] = []
    for n in notes:
        if n[0] == "pace_account":
            pacer_runs.append(n)
        elif n[1] is not None:
            jobs_of[int(n[1])].append(n)
    counts = overtaken([(r["id"], r["made"], r["sent"]) for r in rows])
    received: dict[str, float] = {}
    for m in messages:
        received.setdefault(str(m["comment_id"]), float(m["time"]))
    by_receipt = overtaken(
        [
            (r["id"], r["made"], received[r["comment_id"]])
            for r in rows
            if r["comment_id"] in received
        ]
    )
    by_id = {r["id"]: r for r in rows}
    late = [row_id for row_id, c in counts.items() if c > batch]
    # The job that sent the row: the one whose run answered SENT (or its last one).
    how: Counter[str] = Counter()
    waits: list[float] = []
    earlier: Counter[str] = Counter()
    for row_id in late:
        jobs = sorted(jobs_of.get(row_id, []), key=lambda n: n[4])
        sender = next((n for n in jobs if _private(n[6]) == "SENT"), jobs[-1] if jobs else None)
        if sender is None:
            how["no job noted"] += 1
            continue
        how["granted by the pacer" if sender[2] is not None else "its own job"] += 1
        waits.append((sender[4] - sender[3]) / 1000)
        for n in jobs:
            if n is not sender:
                earlier[f"{'granted' if n[2] is not None else 'own'}: {_private(n[6])}"] += 1
    worst = sorted(counts, key=lambda row_id: -counts[row_id])[:10]

    def timeline(row_id: int) -> dict[str, Any]:
        row = by_id[row_id]
        return {
            "id": row_id,
            "overtaken_by": counts[row_id],
            "made_s": round(row["made"] - started, 2),
            "in_ledger_s": round(row["created"] - started, 2),
            "sent_s": round(row["sent"] - started, 2),
            "received_s": round(received.get(row["comment_id"], started) - started, 2),
            "overtaken_by_receipt": by_receipt.get(row_id),
            "attempts": row["attempts"],
            "jobs": [
                {
                    "grant": n[2] is not None,
                    "granted_s": round(n[2] / 1e6 - started, 2) if n[2] is not None else None,
                    "queued_s": round(n[3] / 1000 - started, 2),
                    "started_s": round(n[4] / 1000 - started, 2),
                    "finished_s": round(n[5] / 1000 - started, 2),
                    "private": _private(n[6]),
                }
                for n in sorted(jobs_of.get(row_id, []), key=lambda n: n[4])
            ],
        }

    waits.sort()
    return {
        "max_reorder_by_receipt": max(by_receipt.values(), default=0),
        "rows_overtaken_beyond_a_batch": len(late),
        "sent_by": dict(how),
        "sender_queue_wait_s": {
            "p50": waits[len(waits) // 2] if waits else None,
            "max": waits[-1] if waits else None,
        },
        "their_earlier_jobs": dict(earlier),
        "worst": [timeline(row_id) for row_id in worst],
        "pacer": _pacer_summary(pacer_runs, started),
    }


def _pacer_summary(runs: list[Note], started: float) -> dict[str, Any]:
    """How often the pacer ran and how many rows each run granted."""
    runs = sorted(runs, key=lambda n: n[4])
    granted = sorted(int(n[6].get("granted", 0)) for n in runs if isinstance(n[6], dict))
    gaps = sorted((b[4] - a[4]) / 1000 for a, b in pairwise(runs))
    late = sorted((n[4] - n[3]) / 1000 for n in runs)
    return {
        "runs": len(runs),
        "granted": sum(granted),
        "granted_per_run": {"p50": granted[len(granted) // 2], "max": granted[-1]}
        if granted
        else None,
        "gap_between_runs_s": {"p50": gaps[len(gaps) // 2], "max": gaps[-1]} if gaps else None,
        "queue_wait_s": {"p50": late[len(late) // 2], "max": late[-1]} if late else None,
        "first_runs": [
            {
                "started_s": round(n[4] / 1000 - started, 2),
                "result": n[6],
            }
            for n in runs[:12]
        ],
    }
