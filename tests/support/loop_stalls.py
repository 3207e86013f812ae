"""Event-loop stalls of a web process, from its own log.

A web process started by `start_debug_web` logs every callback that held its event loop
0.1 s or more as "Executing … took N seconds", N being the time the loop's thread spent in it,
not waiting for a core (`tests.support.debug_web`). Tests read those lines back: the process
itself measures each stall, so nothing here depends on how long a probe waited on a busy
machine, nor on how busy the machine was while the callback ran.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.support.processes import Service, wait_until

_TOOK = re.compile(r"Executing (?P<what>.*?) took (?P<seconds>[0-9.]+) seconds")


def start_debug_web(env: dict[str, str], port: int, log_dir: Path) -> Service:
    """The web app on `port`, logging its event loop's stalls (`tests.support.debug_web`)."""
    service = Service(
        "web",
        ["-m", "tests.support.debug_web", str(port)],
        env,
        log_dir / f"debug-web-{port}.log",
    ).start()

    def answering() -> bool:
        if not service.running:
            raise RuntimeError(f"web exited early:\n{service.output()}")
        try:
            httpx.get(f"http://127.0.0.1:{port}/health/live", timeout=2)
        except httpx.TransportError:
            return False
        return True

    try:
        # While the process runs it is starting: on a loaded machine that took over 60 s.
        wait_until(answering, timeout=180, what="the web process to answer /health/live")
    except BaseException:
        service.stop()
        raise
    return service


@dataclass(frozen=True, slots=True)
class Stall:
    seconds: float
    what: str


def stalls_in(log_text: str, *, at_least_s: float) -> list[Stall]:
    """The stalls of at least `at_least_s` logged in `log_text`."""
    found = (
        Stall(float(m.group("seconds")), m.group("what")[:300]) for m in _TOOK.finditer(log_text)
    )
    return [stall for stall in found if stall.seconds >= at_least_s]


class LogWatch:
    """Read only what a log file gained since the last look."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._offset = 0

    def skip(self) -> None:
        self.read()

    def read(self) -> str:
        try:
            with open(self._path, "rb") as log:
                log.seek(self._offset)
                data = log.read()
        except FileNotFoundError:
            return ""
        self._offset += len(data)
        return data.decode(errors="replace")
