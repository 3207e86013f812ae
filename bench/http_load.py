"""A lean HTTP/1.1 load generator: keep-alive connections, closed or open loop, latencies.

The load runs on the same two cores as the server under test, so the client must cost as
little as possible: requests are pre-rendered bytes, responses are parsed only as far as
the status line and Content-Length. Latency is measured from when a request was *due* (open
loop) or sent (closed loop) until its response is complete, so a server that falls behind
a steady rate shows it in the percentiles instead of hiding it (coordinated omission).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# A request: the bytes to write, and how many comment events it carries.
RequestFactory = Callable[[int], tuple[bytes, int]]


def render_request(
    method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None
) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1"]
    for name, value in (headers or {}).items():
        lines.append(f"{name}: {value}")
    if body or method == "POST":
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


@dataclass
class LoadResult:
    requests: int = 0
    events: int = 0
    elapsed_s: float = 0.0
    latencies: list[float] = field(default_factory=list)
    statuses: Counter[int] = field(default_factory=Counter)

    async def timed(self, connection: _Connection, request: tuple[bytes, int], at: float) -> None:
        """Send one request; its latency counts from `at` (when sent, or when due)."""
        payload, events = request
        status = await connection.exchange(payload)
        self.latencies.append(time.perf_counter() - at)
        self.requests += 1
        self.statuses[status] += 1
        if status == 200:
            self.events += events

    @property
    def requests_per_s(self) -> float:
        return self.requests / self.elapsed_s if self.elapsed_s else 0.0

    def summary(self) -> dict[str, Any]:
        ordered = sorted(self.latencies)
        return {
            "requests": self.requests,
            "events": self.events,
            "seconds": round(self.elapsed_s, 3),
            "requests_per_s": round(self.requests / self.elapsed_s, 1) if self.elapsed_s else 0,
            "events_per_s": round(self.events / self.elapsed_s, 1) if self.elapsed_s else 0,
            "p50_ms": percentile_ms(ordered, 0.50),
            "p99_ms": percentile_ms(ordered, 0.99),
            "max_ms": round(ordered[-1] * 1000, 2) if ordered else None,
            "statuses": {str(k): v for k, v in sorted(self.statuses.items())},
        }


def percentile_ms(ordered: list[float], q: float) -> float | None:
    """The q-quantile of sorted durations in seconds, in milliseconds."""
    if not ordered:
        return None
    index = min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))
    return round(ordered[index] * 1000, 2)


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(cls, port: int) -> _Connection:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer)

    async def exchange(self, request: bytes) -> int:
        self.writer.write(request)
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        length = 0
        for line in head.split(b"\r\n")[1:]:
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
                break
        if length:
            await self.reader.readexactly(length)
        return status

    def close(self) -> None:
        self.writer.close()


async def closed_loop(
    port: int, make: RequestFactory, *, connections: int, duration_s: float, start_index: int = 0
) -> LoadResult:
    """As fast as the server answers, `connections` requests in flight at any time."""
    result = LoadResult()
    counter = iter(range(start_index, 1 << 62))
    stop_at = time.perf_counter() + duration_s

    async def run() -> None:
        connection = await _Connection.open(port)
        try:
            while time.perf_counter() < stop_at:
                await result.timed(connection, make(next(counter)), time.perf_counter())
        finally:
            connection.close()

    started = time.perf_counter()
    await asyncio.gather(*(run() for _ in range(connections)))
    result.elapsed_s = time.perf_counter() - started
    return result


async def open_loop(
    port: int,
    make: RequestFactory,
    *,
    rate: float,
    duration_s: float,
    connections: int = 32,
    start_index: int = 0,
) -> LoadResult:
    """Requests due at a steady `rate`; each latency counts from when its request was due."""
    result = LoadResult()
    total = int(rate * duration_s)
    next_slot = iter(range(total))
    started = time.perf_counter()

    async def run() -> None:
        connection = await _Connection.open(port)
        try:
            for slot in next_slot:
                due = started + slot / rate
                delay = due - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                await result.timed(connection, make(start_index + slot), due)
        finally:
            connection.close()

    await asyncio.gather(*(run() for _ in range(connections)))
    result.elapsed_s = time.perf_counter() - started
    return result
