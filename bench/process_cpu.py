"""CPU time spent by each process a benchmark drives, read from the kernel's /proc accounting.

On a machine shared by the worker, PostgreSQL, Redis and the sandbox (and other people's work),
throughput moves with the load; CPU seconds per unit of work do not. `CpuSplit` reads
utime + stime of:

- `sandbox`: the sandbox process (our stand-in for Meta);
- `postgres`: every backend connected to the benchmark's own database (the worker's
  connections and autovacuum on that database), sampled while the benchmark runs so a
  connection opened and closed inside the window counts too (up to its last sample);
- `postgres_shared`: the server's background writer, checkpointer and WAL writer, which
  serve every database on the server, so they count other people's writes as well;
- `redis`: the whole Redis server, shared with other people's runs in the same way.

Backends that the benchmark itself uses to watch (connections whose application_name is
`OBSERVER`) are left out. Linux only; a process whose /proc entry cannot be read counts 0, and
so does a server that is not on this machine (PostgreSQL or Redis in a container): the figure
is then 0, not someone else's CPU.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import redis

OBSERVER = "bench-observer"
_TICKS_PER_S = os.sysconf("SC_CLK_TCK")
_SHARED_TYPES = ("checkpointer", "background writer", "walwriter")
_SAMPLE_EVERY_S = 0.1


def cpu_seconds(pid: int, command: str | None = None) -> float:
    """utime + stime of one process in seconds; 0 when it has gone or cannot be read, or when
    `command` is given and the process here of that pid is another program (the server runs in
    a container or on another machine, and its pid means something else here)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    # The command name (field 2) is in parentheses and may hold spaces: split after it.
    if command is not None and text[text.index("(") + 1 : text.rindex(")")] != command:
        return 0.0
    fields = text[text.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS_PER_S


def redis_pid(url: str) -> int | None:
    client = redis.Redis.from_url(url)
    try:
        info: dict[str, Any] = client.info("server")  # type: ignore[assignment]
        pid = info.get("process_id")
    finally:
        client.close()
    return int(pid) if pid is not None else None


@dataclass
class _Group:
    """Pids of one role: CPU at the window's start (0 for a pid first seen later) and last read."""

    command: str | None = None
    start: dict[int, float] = field(default_factory=dict)
    last: dict[int, float] = field(default_factory=dict)

    def see(self, pid: int, started: bool) -> None:
        now = cpu_seconds(pid, self.command)
        if not started:
            self.start[pid] = now
        else:
            self.start.setdefault(pid, 0.0)
        self.last[pid] = max(now, self.last.get(pid, 0.0))

    def seconds(self) -> float:
        return sum(self.last[pid] - self.start[pid] for pid in self.last)


class CpuSplit:
    """`start()` before the measured work, `stop()` after it; `per(n)` gives ms per unit."""

    def __init__(
        self, database_url: str, database: str, *, sandbox_pid: int | None, redis_url: str
    ) -> None:
        self._url = database_url
        self._database = database
        self._fixed = {
            "sandbox": [sandbox_pid] if sandbox_pid else [],
            "redis": [p for p in [redis_pid(redis_url)] if p],
        }
        self._groups = {
            "sandbox": _Group(),
            "postgres": _Group("postgres"),
            "postgres_shared": _Group("postgres"),
            "redis": _Group("redis-server"),
        }
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._conn: psycopg.Connection[tuple[Any, ...]] | None = None

    def _sample(self, conn: psycopg.Connection[tuple[Any, ...]], started: bool) -> None:
        rows = conn.execute(
            "SELECT pid, datname = %s FROM pg_stat_activity "
            "WHERE (datname = %s AND application_name IS DISTINCT FROM %s) "
            "OR backend_type = ANY(%s)",
            (self._database, self._database, OBSERVER, list(_SHARED_TYPES)),
        ).fetchall()
        for pid, own in rows:
            self._groups["postgres" if own else "postgres_shared"].see(int(pid), started)
        for name, pids in self._fixed.items():
            for pid in pids:
                self._groups[name].see(pid, started)

    def _run(self, conn: psycopg.Connection[tuple[Any, ...]]) -> None:
        while not self._stop.wait(_SAMPLE_EVERY_S):
            self._sample(conn, started=True)

    def start(self) -> None:
        conn = psycopg.connect(self._url, autocommit=True, application_name=OBSERVER)
        self._conn = conn
        self._sample(conn, started=False)
        self._thread = threading.Thread(target=self._run, args=(conn,), daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._conn is not None:
            self._sample(self._conn, started=True)
            self._conn.close()
            self._conn = None

    def per(self, units: int) -> dict[str, float]:
        """Milliseconds of CPU per unit of work, by role."""
        per = max(units, 1)
        return {name: round(1000 * g.seconds() / per, 2) for name, g in self._groups.items()}
