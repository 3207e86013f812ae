"""The HTTP server's protocol with a bound on a request's head (request line and headers).

uvicorn's httptools protocol keeps reading a request line or a header for as long as bytes
come: an 8 MB header was read whole and answered, so a few clients sending endless headers
could fill the process's memory. This protocol counts the bytes received while a request's
head is still incomplete and, past `MAX_HEAD_BYTES`, answers 431 and closes the connection.
Browsers send a few kilobytes; cookies, htmx headers and a long query fit easily. Bodies
have their own limits (the app's `request_max_body_size`, the webhook's own cap).
"""

from __future__ import annotations

from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

MAX_HEAD_BYTES = 64 * 1024
TOO_LARGE = b"The request's headers are too large."


class BoundedHeadProtocol(HttpToolsProtocol):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._in_head = True
        self._head_bytes = 0

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        # Counted after parsing, so a chunk that finished the head and carries a body is not
        # held against the head; one chunk of a pipelined next request may be.
        if self._in_head and not self.transport.is_closing():
            self._head_bytes += len(data)
            if self._head_bytes > MAX_HEAD_BYTES:
                self._refuse()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head = True
        self._head_bytes = 0

    def on_headers_complete(self) -> None:
        self._in_head = False
        super().on_headers_complete()

    def _refuse(self) -> None:
        self.transport.write(
            b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
            b"content-type: text/plain; charset=utf-8\r\n"
            b"content-length: %d\r\nconnection: close\r\n\r\n" % len(TOO_LARGE) + TOO_LARGE
        )
        self.transport.close()
