"""Start the Instagram sandbox as a real subprocess, and receive the webhooks it sends.

``start_sandbox`` launches ``python -m sandbox`` on a free loopback port, waits for
``/_admin/health`` by polling (never a fixed sleep) and stops it on exit::

    env = {"SANDBOX_WEBHOOK_CALLBACK_URL": url, "SANDBOX_WEBHOOK_VERIFY_TOKEN": token}
    with start_sandbox(env) as sb:
        sb.admin.reset()
        graph_base = sb.graph_base  # http://127.0.0.1:<port>/v25.0

In a session fixture: ``with start_sandbox(env) as sandbox: yield sandbox``.

``WebhookReceiver`` is a small threaded HTTP server on a random path of its own that answers
the verification handshake, keeps every POST's raw bytes and headers, and can be told to fail
or stall the next POSTs.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, Self
from urllib.parse import parse_qs, urlsplit

import httpx

from sandbox.client import SandboxAdmin
from tests.support.processes import ROOT, Service, free_port, wait_until

DEFAULT_LOG_DIR = ROOT / "test-results"


@dataclass
class SandboxProcess:
    port: int
    service: Service
    _admin: SandboxAdmin | None = field(default=None, repr=False)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def graph_base(self) -> str:
        return f"{self.base_url}/v25.0"

    @property
    def admin(self) -> SandboxAdmin:
        if self._admin is None:
            self._admin = SandboxAdmin(self.base_url)
        return self._admin

    @property
    def running(self) -> bool:
        return self.service.running

    def output(self) -> str:
        return self.service.output()

    def stop(self, timeout: float = 10.0) -> int | None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None
        return self.service.stop(timeout=timeout)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


def start_sandbox(
    env: dict[str, str] | None = None,
    port: int | None = None,
    *,
    log_dir: Path = DEFAULT_LOG_DIR,
) -> SandboxProcess:
    """Launch ``python -m sandbox`` and return once it answers ``/_admin/health``."""
    port = port or free_port()
    extra = dict(env or {})
    extra.setdefault("SANDBOX_PUBLIC_URL", f"http://127.0.0.1:{port}")
    args = ["-m", "sandbox", "--host", "127.0.0.1", "--port", str(port)]
    service = Service("sandbox", args, extra, log_dir / f"sandbox-{port}.log").start()
    started = SandboxProcess(port=port, service=service)

    def healthy() -> bool:
        try:
            return httpx.get(f"{started.base_url}/_admin/health", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    try:
        service.wait_until_ready(healthy, interval=0.05, what="the sandbox's /_admin/health")
    except BaseException:
        started.stop()
        raise
    return started


# --- a webhook receiver for tests -------------------------------------------------------


@dataclass(frozen=True)
class ReceivedWebhook:
    body: bytes
    headers: dict[str, str]  # lower-case names
    received_at: float
    status: int  # what the receiver answered

    def json(self) -> Any:
        return json.loads(self.body)

    def signature_valid(self, secret: str) -> bool:
        """Meta's check: HMAC-SHA256 of the exact raw bytes, constant-time compared."""
        header = self.headers.get("x-hub-signature-256", "")
        expected = "sha256=" + hmac.new(secret.encode(), self.body, hashlib.sha256).hexdigest()
        return hmac.compare_digest(header, expected)


@dataclass
class _Script:
    status: int
    delay: float


class WebhookReceiver:
    """A callback endpoint on a free loopback port. Answers 200 unless scripted otherwise."""

    def __init__(
        self,
        verify_token: str = "receiver-verify-token",  # noqa: S107 - a test value, not a secret
        path: str | None = None,
    ) -> None:
        self.verify_token = verify_token
        # A path of its own: a sandbox of another run on this machine may still be retrying a
        # webhook to a port the kernel has since given to this receiver; that POST must not
        # count as one of ours.
        self.path = path or f"/webhooks/{secrets.token_hex(8)}"
        self.received: list[ReceivedWebhook] = []
        self.handshakes: list[dict[str, str]] = []
        self._script: deque[_Script] = deque()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}{self.path}"

    def respond_with(self, *statuses: int, delay: float = 0.0) -> None:
        """The next POSTs get these statuses, each after ``delay`` seconds."""
        with self._lock:
            self._script.extend(_Script(s, delay) for s in statuses)

    def clear(self) -> None:
        with self._lock:
            self.received.clear()
            self.handshakes.clear()
            self._script.clear()

    def posts(self) -> list[ReceivedWebhook]:
        with self._lock:
            return list(self.received)

    def wait_for(self, count: int, timeout: float = 60.0) -> list[ReceivedWebhook]:
        """Wait (polling) until at least ``count`` POSTs have arrived; return them all. The
        sandbox posts within milliseconds; the bound is for a loaded machine."""
        wait_until(
            lambda: len(self.posts()) >= count,
            timeout=timeout,
            interval=0.02,
            what=f"{count} webhook POST(s) at {self.url}",
        )
        return self.posts()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def _answer(self, status: int, body: bytes = b"") -> None:
                self.send_response(status)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _ours(self) -> bool:
                if urlsplit(self.path).path == receiver.path:
                    return True
                self._answer(404, b"not this receiver's path")
                return False

            def do_GET(self) -> None:
                if not self._ours():
                    return
                params = {k: v[0] for k, v in parse_qs(urlsplit(self.path).query).items()}
                with receiver._lock:
                    receiver.handshakes.append(params)
                ok = (
                    params.get("hub.mode") == "subscribe"
                    and params.get("hub.verify_token") == receiver.verify_token
                )
                if ok:
                    self._answer(200, params.get("hub.challenge", "").encode())
                else:
                    self._answer(403, b"verify token mismatch")

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if not self._ours():
                    return
                with receiver._lock:
                    script = receiver._script.popleft() if receiver._script else _Script(200, 0)
                if script.delay:
                    time.sleep(script.delay)
                with receiver._lock:
                    receiver.received.append(
                        ReceivedWebhook(
                            body=body,
                            headers={k.lower(): v for k, v in self.headers.items()},
                            received_at=time.monotonic(),
                            status=script.status,
                        )
                    )
                try:
                    self._answer(script.status, b"ok" if script.status < 300 else b"nope")
                except (BrokenPipeError, ConnectionResetError):
                    return

        return Handler

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
