"""How a handler answers htmx: a fragment or the whole page, and a redirect htmx follows.

`wants_partial` is the one place that reads the request's htmx headers. A history restore
(htmx lost a page from its cache and fetches it again) needs the whole page, so it counts
as a page view here. The `HX-*` response headers come from `litestar_htmx`'s responses
(`ClientRedirect`, `HTMXTemplate`), never set by hand.
"""

from __future__ import annotations

from typing import Any

from litestar import Response
from litestar.plugins.htmx import ClientRedirect, HTMXRequest
from litestar.response import Redirect


def wants_partial(request: HTMXRequest) -> bool:
    """Whether to answer for htmx (a fragment, or htmx's own redirect) rather than with a
    page: htmx asked, and not to restore a page missing from its history cache."""
    return bool(request.htmx) and not request.htmx.history_restore_request


def redirect(request: HTMXRequest, location: str) -> Response[Any]:
    """Send the browser to `location`: a 303 for a page or form, `HX-Redirect` for htmx (a 3xx
    would be followed inside htmx's request and the next page swapped into the form)."""
    if wants_partial(request):
        return ClientRedirect(location)
    return Redirect(location, status_code=303)
