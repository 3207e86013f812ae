"""Runs the app under uvicorn with an HTTP protocol that can reset a connection on purpose.

``deliver_then_reset`` must look to the client like a connection torn down after its request
was fully sent and processed: no status line, no body. The app cannot reach the socket, so
this protocol puts a ``reset`` callable into each request's ASGI ``extensions``; calling it
sets SO_LINGER to zero (so closing sends a TCP RST rather than a FIN) and aborts the
transport, and marks the response cycle disconnected so nothing more is written.
"""

from __future__ import annotations

import contextlib
import socket
import struct

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from sandbox.app import create_app
from sandbox.config import SandboxConfig
from sandbox.outcomes import RESET_EXTENSION
from sandbox.runtime import Sandbox


class ResettableHttpToolsProtocol(HttpToolsProtocol):
    def on_message_begin(self) -> None:
        super().on_message_begin()
        extensions = dict(self.scope.get("extensions") or {})
        extensions[RESET_EXTENSION] = {"reset": self._reset_connection}
        self.scope["extensions"] = extensions

    def _reset_connection(self) -> None:
        transport = self.transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError, AttributeError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        if self.cycle is not None:
            self.cycle.disconnected = True
        transport.abort()


def serve(config: SandboxConfig, sandbox: Sandbox) -> None:
    server_config = uvicorn.Config(
        create_app(config, sandbox=sandbox),
        host=config.host,
        port=config.port,
        http=ResettableHttpToolsProtocol,
        lifespan="on",
        log_level="warning",
        access_log=False,
        # Hanging requests (deliver_then_hang) must not hold up a test's teardown.
        timeout_graceful_shutdown=1,
        timeout_keep_alive=30,
    )
    uvicorn.Server(server_config).run()
