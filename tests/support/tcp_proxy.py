"""A TCP proxy a test can cut: PostgreSQL or Redis "down" without touching the shared server.

    with TcpProxy(5432) as proxy:
        url = f"postgresql://postgres@127.0.0.1:{proxy.port}/db"
        proxy.down()   # connections refused, open ones dropped
        proxy.up()     # the same port answers again

It runs on an event loop in a thread of its own, so it keeps forwarding whatever the test's
loop (or an in-process app's, which Litestar's test client runs in another thread) is doing.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from types import TracebackType

from tests.support.processes import free_port


class TcpProxy:
    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self.port = free_port()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    def __enter__(self) -> TcpProxy:
        self._thread.start()
        self.up()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.down()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    def up(self) -> None:
        self._call(self._up())

    def down(self) -> None:
        self._call(self._down())

    def _call(self, coroutine: object) -> None:
        future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)  # type: ignore[arg-type]
        future.result(timeout=30)

    async def _up(self) -> None:
        if self._server is None:
            self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)

    async def _down(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for writer in list(self._writers):
            writer.close()
        self._writers.clear()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        self._writers |= {writer, up_writer}
        await asyncio.gather(
            self._pipe(reader, up_writer), self._pipe(up_reader, writer), return_exceptions=True
        )
        self._writers -= {writer, up_writer}

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        finally:
            with contextlib.suppress(OSError, RuntimeError):
                writer.close()
