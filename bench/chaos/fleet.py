"""Our processes for the run: two web processes and three workers, kept running.

A worker is SIGKILLed on a schedule and started again at once, as a supervisor (systemd,
Kubernetes) would restart it. Any process that exits on its own is started again too, and
counted: an unplanned exit (say, when Redis or PostgreSQL went away) is worth knowing about.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bench.chaos.services import Child, Scratch

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Fleet:
    scratch: Scratch
    env: dict[str, str]
    log_dir: Path
    web_ports: list[int]
    worker_count: int
    webs: list[Child] = field(default_factory=list)
    workers: list[Child] = field(default_factory=list)
    kills: int = 0
    unplanned_exits: list[str] = field(default_factory=list)
    _next_victim: int = 0
    _starts: int = 0

    def start(self) -> None:
        self.webs = [self._web(port) for port in self.web_ports]
        self.workers = [self._worker(i) for i in range(self.worker_count)]
        for web, port in zip(self.webs, self.web_ports, strict=True):
            self._wait_web(web, port)

    def _spawn(self, name: str, args: list[str]) -> Child:
        self._starts += 1
        child = Child(
            name,
            [sys.executable, *args],
            self.log_dir / f"{name}.log",
            env=self.env,
            cwd=ROOT,
        )
        return self.scratch.adopt(child.start())

    def _web(self, port: int) -> Child:
        return self._spawn(f"web-{port}", ["-m", "app", "serve", "--port", str(port)])

    def _worker(self, index: int) -> Child:
        return self._spawn(f"worker-{index}", ["-m", "worker"])

    def _wait_web(self, web: Child, port: int, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not web.running:
                raise RuntimeError(f"{web.name} exited at start:\n{web.tail()}")
            try:
                httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)
            except httpx.TransportError:
                time.sleep(0.2)
            else:
                return
        raise RuntimeError(f"the web process on port {port} did not answer within {timeout:g} s")

    def kill_one(self) -> str:
        """SIGKILL the next worker in turn and start its replacement."""
        index = self._next_victim % len(self.workers)
        self._next_victim += 1
        victim = self.workers[index]
        victim.kill()
        self.kills += 1
        self.workers[index] = self._worker(index)
        return f"{victim.name} (pid {victim.pid})"

    def supervise(self) -> list[str]:
        """Start again whatever exited by itself; returns what did."""
        exited: list[str] = []
        for i, child in enumerate(self.workers):
            if not child.running:
                exited.append(f"{child.name} exited with {child.process and child.process.poll()}")
                self.workers[i] = self._worker(i)
        for i, child in enumerate(self.webs):
            if not child.running:
                exited.append(f"{child.name} exited with {child.process and child.process.poll()}")
                self.webs[i] = self._web(self.web_ports[i])
        self.unplanned_exits.extend(exited)
        return exited

    def stop(self) -> None:
        for child in [*self.workers, *self.webs]:
            child.stop(timeout=30)
