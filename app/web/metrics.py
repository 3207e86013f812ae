"""`/metrics`: Prometheus's text format for operators (`app/metrics.py` says what is in it).

Protected either way: with `METRICS_TOKEN` set, a scrape must bear it
(`Authorization: Bearer <token>`); without one, only a client on this machine's loopback is
answered. Behind a reverse proxy that passes `X-Forwarded-For` (a `TRUSTED_PROXIES` peer),
the client is the one the proxy names, so the open internet never counts as loopback.
"""

from __future__ import annotations

import hmac
from typing import Any

from litestar import Controller, Request
from litestar.di import NamedDependency
from litestar.exceptions import NotAuthorizedException, PermissionDeniedException
from litestar.response import Response
from prometheus_client import CONTENT_TYPE_LATEST

from app.metrics import render_metrics
from app.resources import Resources
from app.web.reads import get_or_head

_LOOPBACK = frozenset({"127.0.0.1", "::1"})


class MetricsController(Controller):
    @get_or_head("/metrics", name="metrics", cache=False)
    async def metrics(
        self, request: Request[Any, Any, Any], resources: NamedDependency[Resources]
    ) -> Response[bytes]:
        _refuse_unless_allowed(request, resources.settings.metrics_token)
        return Response(
            await render_metrics(resources),
            media_type=CONTENT_TYPE_LATEST,
            headers={"Cache-Control": "no-store"},
        )


def is_local_client(request: Request[Any, Any, Any]) -> bool:
    """The client is on this machine's loopback: after `TRUSTED_PROXIES` handling, so a
    request a local reverse proxy forwards counts as the address it names."""
    return (request.client.host if request.client else None) in _LOOPBACK


def _refuse_unless_allowed(request: Request[Any, Any, Any], token: str | None) -> None:
    """A refusal in the app's error shape (a page, or JSON with a `detail` for a scraper)."""
    if token is not None:
        offered = request.headers.get("authorization", "")
        if hmac.compare_digest(offered.encode(), f"Bearer {token}".encode()):
            return
        raise NotAuthorizedException(
            "A metrics token is required: Authorization: Bearer <METRICS_TOKEN>.",
            headers={"WWW-Authenticate": 'Bearer realm="metrics"'},
        )
    if not is_local_client(request):
        raise PermissionDeniedException(
            "Metrics are served to this machine only; set METRICS_TOKEN to scrape from elsewhere."
        )
