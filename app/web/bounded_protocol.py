"""The HTTP server's protocol, with bounds on how much and how slowly a client may send.

uvicorn's httptools protocol keeps reading a request line or a header for as long as bytes
come, and waits for a request's head or the rest of its body for as long as the client keeps
the connection open. An 8 MB header was read whole and answered, so a few clients sending
endless headers could fill the process's memory; and a client sending its headers one byte at
a time, or stopping half-way through a body, held its connection (a socket, a buffer, for a
body a running request) for ever, so enough of them ran the process out of file descriptors.

This protocol:

- counts the bytes received while a request's head is still incomplete and, past
  `MAX_HEAD_BYTES`, answers 431 and closes the connection. Browsers send a few kilobytes;
  cookies, htmx headers and a long query fit easily. Bodies have their own limits (the app's
  `request_max_body_size`, the webhook's own cap).
- gives a request's line and headers `read_timeout_s` in all from its first byte (a new
  connection's from its opening), and a body that was announced `read_timeout_s` between two
  arrivals of its bytes; past either it answers 408 and closes the connection. A new
  connection that sent nothing in that time is closed without an answer. The waits are one
  `loop.call_later` timer per connection, moved on only when it fires, so a busy connection
  costs no timer per chunk. Time the server itself holds a connection back (reading paused
  while a request's body waits for the app, or a pipelined request waits for the one before
  it) does not count against the client.
- when the app has answered before a request's body has all arrived (a 413 for a body past
  its limit, a 403), gives the rest of the body `read_timeout_s` in all, then closes the
  connection: the bytes would be read for no one, and a chunked body never ends. Closing at
  once would make the kernel reset the connection over the unread bytes, and the client
  might never read its answer. A body that does end in time leaves the connection idle, under
  uvicorn's keep-alive bound again.

An idle connection between requests is closed by uvicorn after `KEEP_ALIVE_S`.
"""

from __future__ import annotations

import asyncio
import enum
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

MAX_HEAD_BYTES = 64 * 1024
# uvicorn's own default, set here on purpose: long enough for a browser's next click or a
# proxy's next request on the same connection, short enough that idle sockets do not pile up.
# A reverse proxy that keeps connections to the web process must drop idle ones sooner.
KEEP_ALIVE_S = 5
TOO_LARGE = b"The request's headers are too large."
TOO_SLOW = b"The request took too long to arrive."


class _Wait(enum.Enum):
    OPENED = "opened"  # a new connection; nothing of a request yet
    HEAD = "head"  # a request's line and headers are arriving
    BODY = "body"  # its headers are in; its body is arriving
    NONE = "none"  # the request is whole: the app's turn, then uvicorn's keep-alive


class BoundedHeadProtocol(HttpToolsProtocol):
    read_timeout_s: float = 10.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._in_head = True
        self._head_bytes = 0
        self._wait = _Wait.OPENED
        # Loop time the head began, or (for a body) its bytes last arrived.
        self._since = 0.0
        self._timer: asyncio.TimerHandle | None = None
        # Answered before the body was all here: the rest has a deadline, not a pace.
        self._draining = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._since = self.loop.time()
        self._arm(self.read_timeout_s)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._wait is _Wait.BODY and not self._draining:
            self._since = self.loop.time()
        super().data_received(data)
        # Counted after parsing, so a chunk that finished the head and carries a body is not
        # held against the head; one chunk of a pipelined next request may be.
        if self._in_head and not self.transport.is_closing():
            self._head_bytes += len(data)
            if self._head_bytes > MAX_HEAD_BYTES:
                self._refuse(b"431 Request Header Fields Too Large", TOO_LARGE)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head = True
        self._head_bytes = 0
        if self._wait is not _Wait.OPENED:  # a new connection's head counts from its opening
            self._since = self.loop.time()
        self._wait = _Wait.HEAD
        if self._timer is None:
            self._arm(self.read_timeout_s)

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._wait = _Wait.BODY
        self._since = self.loop.time()
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._wait = _Wait.NONE
        drained, self._draining = self._draining, False
        super().on_message_complete()
        if drained and self.timeout_keep_alive_task is None and not self.transport.is_closing():
            # uvicorn armed the idle bound when the answer went out, and each byte of this
            # body since cancelled it: the connection, idle now, would be kept for ever.
            self.timeout_keep_alive_task = self.loop.call_later(
                self.timeout_keep_alive, self.timeout_keep_alive_handler
            )

    def on_response_complete(self) -> None:
        if self._wait is _Wait.BODY and not self.transport.is_closing():
            self._draining = True
            self._since = self.loop.time()
            if self._timer is None:
                self._arm(self.read_timeout_s)
        super().on_response_complete()

    def _arm(self, delay: float) -> None:
        self._timer = self.loop.call_later(delay, self._timed_out)

    def _held_by_us(self) -> bool:
        """The server, not the client, is why bytes are not arriving."""
        cycle = self.cycle
        if self._wait is _Wait.BODY:
            # A client that sent `Expect: 100-continue` waits for the app to ask for its body.
            return self.flow.read_paused or (cycle is not None and cycle.waiting_for_100_continue)
        # A pipelined request: its head waits while the one before it is answered.
        return self.flow.read_paused or (cycle is not None and not cycle.response_complete)

    def _timed_out(self) -> None:
        self._timer = None
        # After an upgrade the transport belongs to another protocol.
        if self._wait is _Wait.NONE or self.transport.get_protocol() is not self:
            return
        if self.transport.is_closing():
            return
        now = self.loop.time()
        if self._held_by_us() and not self._draining:
            self._since = now
        left = self._since + self.read_timeout_s - now
        if left > 0:
            self._arm(left)
            return
        if self._wait is _Wait.OPENED:
            self.transport.close()
            return
        cycle = self.cycle if self._wait is _Wait.BODY else None
        if cycle is not None:
            # The app waiting on this body hears that the client is gone and answers no one.
            cycle.disconnected = True
            cycle.message_event.set()
            if cycle.response_started:
                self.transport.close()
                return
        self._refuse(b"408 Request Timeout", TOO_SLOW)

    def _refuse(self, status: bytes, words: bytes) -> None:
        self.transport.write(
            b"HTTP/1.1 %s\r\ncontent-type: text/plain; charset=utf-8\r\n"
            b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (status, len(words), words)
        )
        self.transport.close()


def bounded_protocol(timeout_s: float) -> type[BoundedHeadProtocol]:
    """The protocol class for uvicorn's `http=` (uvicorn builds one per connection itself),
    with its read timeout set."""

    class Bounded(BoundedHeadProtocol):
        read_timeout_s = timeout_s

    return Bounded
