"""What the route fuzzer's modules (tests/fuzz) share: the app's route table, read from
`create_app(...).routes` so a route added later is swept without a change, a request written
byte for byte as one of the fuzzed people, and the check every answer must pass."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from app.asgi import create_app
from app.settings import load_settings
from tests.support.fuzz_target import Target
from tests.support.infra import base_env
from tests.support.raw_http import RawAnswer, raw_request

PARAM = re.compile(r"\{(?P<name>[^:}]+)(?::(?P<kind>[^}]+))?\}")
SERVER_REFUSAL = "Invalid HTTP request received."
# Text only an answer leaking a stack trace or an exception's repr would hold.
TRACE_MARKERS = (
    "Traceback (most recent call last)",
    'File "/',
    "sqlalchemy.exc",
    "psycopg.errors",
    "litestar.exceptions",
    "UnicodeDecodeError",
    "ValueError(",
)


@dataclass(frozen=True, slots=True)
class Route:
    method: str
    path: str  # the template, like /log/{dm_log_id:int}
    mount: bool = False  # an ASGI mount answers every path under it

    @property
    def id(self) -> str:
        return f"{self.method} {self.path}"


def route_table() -> list[Route]:
    app = create_app(load_settings(base_env("postgresql://fuzz@127.0.0.1/fuzz", "redis://x")))
    found: set[Route] = set()
    for route in app.routes:
        methods = set(route.methods) or {"GET", "POST"}  # an ASGI route takes any method
        handler = getattr(route, "route_handler", None)
        mount = bool(getattr(handler, "is_mount", False))
        found.update(Route(m, route.path, mount) for m in methods - {"OPTIONS", "HEAD"})
    return sorted(found, key=lambda r: (r.path, r.method))


@dataclass(frozen=True, slots=True)
class Hostile:
    what: str
    who: str
    method: bytes
    target: bytes  # the request target exactly as sent
    headers: tuple[tuple[bytes, bytes], ...] = ()
    body: bytes = b""


def send_raw(target: Target, hostile: Hostile) -> RawAnswer:
    """`hostile` sent as its person (their cookies, unless it brings its own), as a browser
    asking for a page unless it says what it accepts."""
    cookies = "; ".join(f"{c.name}={c.value}" for c in target.clients[hostile.who].cookies.jar)
    headers = (
        [(b"accept", b"text/html")] if not any(n == b"accept" for n, _ in hostile.headers) else []
    )
    if cookies and not any(n == b"cookie" for n, _ in hostile.headers):
        headers.append((b"cookie", cookies.encode()))
    return raw_request(
        target.base_url, hostile.method, hostile.target, [*headers, *hostile.headers], hostile.body
    )


def check_answer(what: object, status: int, headers: Mapping[str, str], body: str) -> None:
    """No server error, no stack trace, and a refusal a person or a script can read."""
    assert status < 500, (what, status, body[:500])
    for marker in TRACE_MARKERS:
        assert marker not in body, (what, status, marker, body[:2000])
    if status < 400:
        return
    content_type = headers.get("content-type", "")
    if "content-security-policy" not in headers and status == 400:
        # The HTTP server's own refusal of a request it cannot parse (bytes that are not
        # ASCII in the request line): the app never saw it.
        assert body == SERVER_REFUSAL, (what, status, body[:500])
        return
    assert content_type.startswith(("text/html", "application/json")), (what, status, content_type)
    if content_type.startswith("application/json"):
        detail = json.loads(body).get("detail")
        assert isinstance(detail, str), (what, status, body[:500])
        assert detail.strip(), (what, status, body[:500])
    else:
        words = re.sub(r"\s+", " ", re.sub(r"<[^>]*>", " ", body)).strip()
        assert len(words) >= 8, (what, status, body[:500])
