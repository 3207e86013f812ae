"""Every state-changing request must come from our own pages: same origin, not merely same site.

The CSRF token is a double submit (a cookie and a form field that must match). A page on the
same site but another origin (another port on the host, a sibling subdomain) can set its own
`csrftoken` cookie for our host and post a matching field, so the token alone does not stop
it. Browsers say where a request comes from: `Sec-Fetch-Site` (every current browser) and
`Origin` (on every POST). A POST, PUT, PATCH or DELETE whose `Sec-Fetch-Site` is anything but
`same-origin` (or `none`: typed by the person), or whose `Origin` is neither this request's
own origin nor `PUBLIC_BASE_URL`'s, is refused with 403 before any handler runs. A request
with neither header (a script, an old browser) still needs the CSRF token.

Machine endpoints that authenticate by signature (the webhook, Meta's callbacks) are exempt,
as they are from the CSRF token.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from urllib.parse import urlsplit

from litestar.datastructures import Headers
from litestar.enums import ScopeType
from litestar.exceptions import PermissionDeniedException
from litestar.types import ASGIApp, Receive, Scope, Send

_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})
_SAME_ORIGIN_SITES = frozenset({"same-origin", "none"})
Middleware = Callable[[ASGIApp], ASGIApp]
REFUSED = "This form was sent from another site. Reload the page and try again."


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


def same_origin_only(public_base_url: str, exempt: Sequence[str]) -> Middleware:
    """The middleware for this deployment: its public origin and the exempt paths."""
    public_origin = _origin(public_base_url)
    exempt_paths = re.compile("|".join(f"(?:{pattern})" for pattern in exempt))

    def middleware(app: ASGIApp) -> ASGIApp:
        async def check_then_run(scope: Scope, receive: Receive, send: Send) -> None:
            if (
                scope["type"] == ScopeType.HTTP
                and scope.get("method", "GET") not in _SAFE_METHODS
                and not exempt_paths.match(scope.get("path", ""))
            ):
                _check(scope, public_origin)
            await app(scope, receive, send)

        return check_then_run

    return middleware


def _check(scope: Scope, public_origin: str) -> None:
    headers = Headers.from_scope(scope)
    site = headers.get("sec-fetch-site")
    if site is not None and site.lower() not in _SAME_ORIGIN_SITES:
        raise PermissionDeniedException(REFUSED)
    origin = headers.get("origin")
    if origin is None:
        return
    if origin == "null" and site is not None and site.lower() == "same-origin":
        # A page served with `Referrer-Policy: no-referrer` (the invite pages) posts its
        # forms with `Origin: null`; the browser's Sec-Fetch-Site still says it is ours.
        return
    own = f"{scope.get('scheme', 'http')}://{headers.get('host', '')}".lower()
    if origin.lower() not in {own, public_origin}:
        raise PermissionDeniedException(REFUSED)
