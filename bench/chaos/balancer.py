"""A round-robin HTTP load balancer in front of the two web processes.

Meta calls one callback URL; a deployment with two web processes puts a balancer there. This
one takes each request in turn to the next web process (per request, not per connection, so
the sandbox's kept-alive connections still spread), answers 502 when that process cannot be
reached, as a real balancer would, and counts what each process received.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
from collections import Counter

import httpx

# Hop-by-hop headers a proxy must not forward.
_HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "host", "content-length"})
READ_LIMIT = 64 * 1024 * 1024


class Balancer:
    def __init__(self, backends: list[int]) -> None:
        self.backends = backends
        self.requests: Counter[int] = Counter()
        self.unreachable: Counter[int] = Counter()
        self._turn = itertools.cycle(range(len(backends)))
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="balancer", daemon=True)
        self._server: asyncio.Server | None = None
        self._client: httpx.AsyncClient | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Balancer:
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError("the balancer did not start")
        return self

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        future = asyncio.run_coroutine_threadsafe(self._close(), self._loop)
        with contextlib.suppress(Exception):
            future.result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    def by_backend(self) -> list[int]:
        return [self.requests[port] for port in self.backends]

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(60.0, connect=5.0),
            limits=httpx.Limits(max_connections=200, max_keepalive_connections=50),
        )
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._connection, "127.0.0.1", 0, limit=READ_LIMIT)
        )
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()
        self._loop.close()

    async def _close(self) -> None:
        if self._server is not None:
            self._server.close()
        if self._client is not None:
            await self._client.aclose()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while await self._one(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        line = await reader.readline()
        if not line.strip():
            return False
        method, target, _ = line.decode("latin-1").split(" ", 2)
        headers: list[tuple[str, str]] = []
        length = 0
        close = False
        while True:
            raw = await reader.readline()
            if raw in (b"\r\n", b"\n", b""):
                break
            name, _, value = raw.decode("latin-1").partition(":")
            name, value = name.strip(), value.strip()
            lowered = name.lower()
            if lowered == "content-length":
                length = int(value)
            elif lowered == "connection" and value.lower() == "close":
                close = True
            if lowered not in _HOP:
                headers.append((name, value))
        body = await reader.readexactly(length) if length else b""
        port = self.backends[next(self._turn)]
        self.requests[port] += 1
        if self._client is None:
            return False
        try:
            response = await self._client.request(
                method, f"http://127.0.0.1:{port}{target}", headers=headers, content=body
            )
            status, payload = response.status_code, response.content
            kind = response.headers.get("content-type", "text/plain")
            reason = response.reason_phrase or "OK"
        except httpx.HTTPError:
            self.unreachable[port] += 1
            status, payload, kind, reason = 502, b"bad gateway", "text/plain", "Bad Gateway"
        head = (
            f"HTTP/1.1 {status} {reason}\r\nContent-Type: {kind}\r\n"
            f"Content-Length: {len(payload)}\r\n"
            f"Connection: {'close' if close else 'keep-alive'}\r\n\r\n"
        )
        writer.write(head.encode("latin-1") + payload)
        await writer.drain()
        return not close
