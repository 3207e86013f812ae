"""The run's own PostgreSQL cluster and redis-server, so it can restart them at will.

Both live in one scratch folder (`Scratch`): `initdb` makes a cluster there that listens on
loopback on a free port, and redis-server runs with no persistence, so its restart loses
everything it held, as a crashed Redis without an append-only file would. Neither touches the
machine's shared services. `Scratch.close` stops every process and removes the folder; the run
calls it in a `finally`, so an exception, Ctrl-C or SIGTERM cleans up too.

PostgreSQL refuses to run as root: as root, the cluster is made and run as the `postgres`
user (Debian's), which then owns the folder.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Protocol

import psycopg
import redis

PG_BIN_DIRS = ("/usr/lib/postgresql/15/bin", "/usr/lib/postgresql/16/bin")
PG_START_TIMEOUT_S = 120.0
# fsync off only skips the flush to disk, which matters when the machine crashes; the run
# kills PostgreSQL, not the machine, so a commit once answered survives, as in production.
# synchronous_commit must stay on: off, a commit answered just before the kill is lost, and
# with it a claim whose send went out (a duplicate the product could not have prevented).


def pg_binary(name: str) -> str:
    """`initdb` / `postgres` from PATH, else Debian's versioned folder."""
    found = shutil.which(name)
    if found:
        return found
    for folder in PG_BIN_DIRS:
        candidate = Path(folder) / name
        if candidate.exists():
            return str(candidate)
    raise RuntimeError(f"{name} not found on PATH nor in {', '.join(PG_BIN_DIRS)}")


def distinct_ports(count: int) -> list[int]:
    """Free loopback ports, all different: each socket stays bound until all are chosen (one
    by one, the kernel may hand out the same port twice before anyone listens on it)."""
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def run_as() -> str | None:
    """The user PostgreSQL must run as: `postgres` when we are root, else ourselves."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        raise RuntimeError("running as root needs a 'postgres' user to run PostgreSQL") from None
    return "postgres"


def _wait(check: object, what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            if callable(check) and check():
                return
        except Exception as exc:  # noqa: BLE001 - any failure means "not up yet"
            last = exc
        time.sleep(0.1)
    raise RuntimeError(f"gave up after {timeout:g} s waiting for {what}: {last}")


@dataclass
class Child:
    """One long-running process of ours, in its own session so a terminal's Ctrl-C reaches
    only the harness, which then stops it in order."""

    name: str
    argv: list[str]
    log_path: Path
    env: dict[str, str] | None = None
    user: str | None = None
    cwd: Path | None = None
    process: subprocess.Popen[bytes] | None = field(default=None, init=False)

    def start(self) -> Child:
        log: IO[bytes] = self.log_path.open("ab")
        try:
            self.process = subprocess.Popen(
                self.argv,
                env=self.env,
                cwd=self.cwd,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                user=self.user,
                group=self.user,
                extra_groups=[] if self.user else None,
            )
        finally:
            log.close()
        return self

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def send(self, signum: int) -> None:
        if self.process is not None and self.running:
            self.process.send_signal(signum)

    def kill(self) -> None:
        """SIGKILL, then reap."""
        self.send(signal.SIGKILL)
        self.wait(10)

    def wait(self, timeout: float) -> int | None:
        if self.process is None:
            return None
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait(timeout=10)

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM, SIGKILL after `timeout`."""
        if self.process is None:
            return
        if self.running:
            self.send(signal.SIGTERM)
        self.wait(timeout)

    def tail(self, lines: int = 30) -> str:
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


@dataclass
class OwnPostgres:
    """A cluster of our own: `initdb` in the scratch folder, `postgres` on `port`."""

    folder: Path
    port: int
    user: str | None
    child: Child | None = None
    restarts: int = 0

    @property
    def admin_url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def url(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    @property
    def data(self) -> Path:
        return self.folder / "pgdata"

    def init(self) -> None:
        if self.user:
            shutil.chown(self.folder, self.user, self.user)
        result = subprocess.run(
            [pg_binary("initdb"), "-D", str(self.data), "-U", "postgres", "-A", "trust",
             "-E", "UTF8", "--no-sync", "--no-instructions"],
            capture_output=True,
            text=True,
            check=False,
            user=self.user,
            group=self.user,
            extra_groups=[] if self.user else None,
        )  # fmt: skip
        if result.returncode != 0:
            raise RuntimeError(f"initdb failed:\n{result.stdout}\n{result.stderr}")

    def start(self) -> None:
        self.child = Child(
            "postgres",
            [
                pg_binary("postgres"), "-D", str(self.data), "-p", str(self.port),
                "-k", str(self.folder), "-c", "listen_addresses=127.0.0.1",
                "-c", "max_connections=400", "-c", "fsync=off", "-c", "full_page_writes=off",
            ],
            self.folder / "postgres.log",
            user=self.user,
        ).start()  # fmt: skip
        _wait(self._answers, f"PostgreSQL on port {self.port}", PG_START_TIMEOUT_S)

    def _answers(self) -> bool:
        if self.child is None or not self.child.running:
            tail = self.child.tail() if self.child else ""
            raise RuntimeError(f"postgres exited:\n{tail}")
        with psycopg.connect(self.admin_url, connect_timeout=2) as conn:
            conn.execute("SELECT 1")
        return True

    def create_database(self, name: str) -> str:
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def restart(self) -> float:
        """An immediate shutdown (no checkpoint: crash recovery on start), then start again.
        Returns the seconds it was unreachable."""
        began = time.monotonic()
        if self.child is not None:
            self.child.send(signal.SIGQUIT)
            self.child.wait(60)
        self.start()
        self.restarts += 1
        return time.monotonic() - began

    def stop(self) -> None:
        if self.child is not None:
            self.child.send(signal.SIGINT)  # fast shutdown: cuts the sessions, then exits
            self.child.wait(30)


@dataclass
class OwnRedis:
    """A redis-server of our own with no persistence: a restart empties it."""

    folder: Path
    port: int
    child: Child | None = None
    restarts: int = 0

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server not found on PATH")
        self.child = Child(
            "redis",
            [
                binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--dir", str(self.folder), "--protected-mode", "yes",
            ],
            self.folder / "redis.log",
        ).start()  # fmt: skip
        _wait(self._answers, f"redis-server on port {self.port}", 30.0)

    def _answers(self) -> bool:
        if self.child is None or not self.child.running:
            raise RuntimeError(f"redis-server exited:\n{self.child.tail() if self.child else ''}")
        client = redis.Redis.from_url(self.url, socket_connect_timeout=1)
        try:
            return bool(client.ping())
        finally:
            client.close()

    def restart(self) -> float:
        """SIGKILL (nothing saved), then a fresh, empty server on the same port."""
        began = time.monotonic()
        if self.child is not None:
            self.child.kill()
        self.start()
        self.restarts += 1
        return time.monotonic() - began

    def stop(self) -> None:
        if self.child is not None:
            self.child.kill()


class Stoppable(Protocol):
    def stop(self) -> object: ...


class Scratch:
    """The run's folder: the cluster, Redis, and every child process started under it."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="oncereply-chaos-"))
        self.folder.chmod(0o755)
        self.children: list[Child] = []
        self.postgres: OwnPostgres | None = None
        self.redis: OwnRedis | None = None
        # Anything else with a stop(): the balancer, the sandbox.
        self.balancer: Stoppable | None = None
        self.sandbox: Stoppable | None = None

    def adopt(self, child: Child) -> Child:
        self.children.append(child)
        return child

    def close(self) -> None:
        # Our processes first (they hold connections), then Redis and PostgreSQL.
        for child in reversed(self.children):
            try:
                child.stop(timeout=30)
            except Exception:  # noqa: BLE001 - keep cleaning up whatever fails
                child.kill()
        for other in (self.sandbox, self.balancer):
            if other is not None:
                other.stop()
        if self.redis is not None:
            self.redis.stop()
        if self.postgres is not None:
            self.postgres.stop()
        shutil.rmtree(self.folder, ignore_errors=True)
