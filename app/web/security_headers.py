"""Security headers on every answer: pages, partials, errors, static files and the webhook.

- `Content-Security-Policy`: scripts, styles, connections and fonts from this origin only,
  no inline code and no `eval` (htmx runs with `allowEval: false` and without its injected
  indicator styles, see templates/base.html; what inline handlers did lives in static/app.js).
  Images may also come over https (Instagram's CDN thumbnails) and from the Graph and
  Instagram Login origins (the sandbox in development). A form may post here and be
  redirected to Instagram Login (Connect Instagram). No page may be framed.
- `X-Frame-Options: DENY` for browsers older than `frame-ancestors`.
- `X-Content-Type-Options: nosniff`.
- `Referrer-Policy: same-origin`, unless the answer chose one (invite pages: `no-referrer`).
- `Strict-Transport-Security` when `PUBLIC_BASE_URL` is https.

A header the handler set itself is kept.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

from litestar.datastructures import MutableScopeHeaders
from litestar.types import Message, Scope

from app.settings import Settings

HSTS = "max-age=31536000; includeSubDomains"


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def content_security_policy(settings: Settings) -> str:
    outside = sorted({_origin(settings.graph_api_base), _origin(settings.instagram_oauth_base)})
    directives = {
        "default-src": "'self'",
        "script-src": "'self'",
        "style-src": "'self'",
        "img-src": " ".join(["'self'", "data:", "https:", *outside]),
        "connect-src": "'self'",
        "font-src": "'self'",
        "object-src": "'none'",
        "base-uri": "'none'",
        "form-action": " ".join(["'self'", _origin(settings.instagram_oauth_base)]),
        "frame-ancestors": "'none'",
    }
    return "; ".join(f"{name} {value}" for name, value in directives.items())


def security_headers(settings: Settings) -> Callable[[Message, Scope], Awaitable[None]]:
    """A `before_send` hook for these settings (it sees every answer the app sends, a 404 for
    an unknown path included); the headers are computed once, at start."""
    headers = {
        "content-security-policy": content_security_policy(settings),
        "x-frame-options": "DENY",
        "x-content-type-options": "nosniff",
        "referrer-policy": "same-origin",
    }
    if settings.cookie_secure:
        headers["strict-transport-security"] = HSTS

    async def add_headers(message: Message, scope: Scope) -> None:
        if message["type"] == "http.response.start":
            answer = MutableScopeHeaders.from_message(message)
            for name, value in headers.items():
                if name not in answer:
                    answer[name] = value

    return add_headers
