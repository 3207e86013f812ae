"""`/health` for machines and the header status badge for people, from one health check.

`/health` is for operators and monitors and carries each probe's result (an exception's type
name at most, never its message, so no DSN or password) to clients on this machine's loopback
(`make dev`, tests, container checks; after `TRUSTED_PROXIES` handling, as for `/metrics`) and
to signed-in users. Anyone else gets the overall status and the HTTP code only: no worker ids,
queue names or latencies. The badge is on every page, the sign-in page too: visitors see only
the state; what is wrong is shown to signed-in users.
"""

from __future__ import annotations

from typing import Any

from litestar import Controller
from litestar.di import NamedDependency
from litestar.plugins.htmx import HTMXRequest
from litestar.response import Response, Template
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.current import peek_viewer
from app.health import check_health
from app.resources import Resources
from app.web.metrics import is_local_client
from app.web.reads import get_or_head


class HealthController(Controller):
    @get_or_head("/health", name="health", cache=False, exclude_from_csrf=True)
    async def health(
        self,
        request: HTMXRequest,
        resources: NamedDependency[Resources],
        db_session: NamedDependency[AsyncSession],
    ) -> Response[dict[str, Any]]:
        report = await check_health(resources)
        body = report.as_json()
        # A dead database must not turn /health into an error: a stranger then gets the status.
        if not is_local_client(request) and not (
            report.database.get("ok") and await peek_viewer(request, db_session)
        ):
            body = {"status": body["status"]}
        return Response(
            body,
            status_code=200 if report.ok else 503,
            headers={"Cache-Control": "no-store"},
        )

    @get_or_head("/health/live", name="health_live", cache=False)
    async def live(self) -> dict[str, str]:
        """The process answers: for container checks that must not depend on the worker."""
        return {"status": "ok"}

    @get_or_head("/status/badge", name="status_badge", cache=False)
    async def badge(
        self,
        request: HTMXRequest,
        resources: NamedDependency[Resources],
        db_session: NamedDependency[AsyncSession],
    ) -> Template:
        report = await check_health(resources)
        # A dead database must not turn the badge into an error page: it says "down" then.
        signed_in = report.database.get("ok") and await peek_viewer(request, db_session)
        return Template(
            "partials/status_badge.html",
            context={"health": report, "detailed": bool(signed_in)},
            headers={"Cache-Control": "no-store"},
        )
