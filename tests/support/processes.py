"""Run our own processes (web, worker) as real subprocesses and wait for them by polling."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
# A process still starting that has used no CPU for this long is stuck, not slow; one still
# not ready after the second bound never will be.
START_STALL_S = 60.0
START_LIMIT_S = 600.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def run_cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m app <args>` run to its end as a person would, its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "app", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def wait_until(
    check: Callable[[], bool], *, timeout: float, interval: float = 0.1, what: str
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(interval)
    raise TimeoutError(f"gave up after {timeout:g} s waiting for {what}")


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) process `pid` has used so far, from /proc/<pid>/stat."""
    after_name = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(after_name[11]) + int(after_name[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Service:
    """A child process with its output captured to a log file for post-mortems."""

    name: str
    args: list[str]
    env: dict[str, str]
    log_path: Path
    process: subprocess.Popen[bytes] | None = field(default=None, init=False)

    def start(self) -> Service:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [sys.executable, *self.args],
            cwd=ROOT,
            env={**os.environ, **self.env},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        return self

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def signal(self, signum: int) -> None:
        if self.process is not None and self.running:
            self.process.send_signal(signum)

    def stop(self, timeout: float = 30.0) -> int | None:
        if self.process is None:
            return None
        if self.running:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
        return self.process.returncode

    def kill(self) -> None:
        if self.process is not None and self.running:
            self.process.kill()
            self.process.wait(timeout=5)

    def output(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def wait_until_ready(
        self, ready: Callable[[], bool], *, what: str, interval: float = 0.1
    ) -> None:
        """Until `ready()`, while the process is starting. On a loaded machine a start (imports,
        the first run's bytecode) takes as long as the CPU the process gets, so this waits on
        its progress, not on a guessed time: it gives up when the process exits, when it has
        used no CPU for START_STALL_S, or after START_LIMIT_S in all."""
        assert self.process is not None, "start() first"
        began = last_progress = time.monotonic()
        used = -1.0
        while True:
            if not self.running:
                raise RuntimeError(f"{self.name} exited before {what}:\n{self.output()}")
            if ready():
                return
            now = time.monotonic()
            try:
                cpu = cpu_seconds(self.process.pid)
            except OSError:  # it has just exited: the next round says so
                cpu = used
            if cpu != used:
                used, last_progress = cpu, now
            elif now - last_progress > START_STALL_S:
                raise TimeoutError(
                    f"gave up waiting for {what}: {self.name} has used no CPU for "
                    f"{START_STALL_S:g} s\n{self.output()[-4000:]}"
                )
            if now - began > START_LIMIT_S:
                raise TimeoutError(f"gave up after {START_LIMIT_S:g} s waiting for {what}")
            time.sleep(interval)


def start_web(env: dict[str, str], port: int, log_dir: Path) -> Service:
    service = Service(
        "web", ["-m", "app", "serve", "--port", str(port)], env, log_dir / f"web-{port}.log"
    ).start()
    url = f"http://127.0.0.1:{port}/health"

    def answering() -> bool:
        try:
            httpx.get(url, timeout=2)
        except httpx.TransportError:
            return False
        return True

    try:
        service.wait_until_ready(answering, what="the web process to answer /health")
    except BaseException:
        service.stop()
        raise
    return service


def start_worker(env: dict[str, str], log_dir: Path, name: str = "worker") -> Service:
    return Service(name, ["-m", "worker"], env, log_dir / f"{name}-{time.time_ns()}.log").start()


def health(port: int) -> tuple[int, dict[str, object]]:
    response = httpx.get(f"http://127.0.0.1:{port}/health", timeout=5)
    return response.status_code, response.json()


def worker_beating(port: int) -> bool:
    """Whether the web process on `port` sees a live worker heartbeat; not yet, while the web
    is too busy to answer within health()'s bound (a loaded machine)."""
    try:
        checks = health(port)[1].get("checks")
    except httpx.TimeoutException:
        return False
    worker = checks.get("worker") if isinstance(checks, dict) else None
    return isinstance(worker, dict) and bool(worker.get("ok"))
