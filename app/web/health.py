"""`/health` for machines and the header status badge for people, from one health check."""

from __future__ import annotations

from typing import Any

from litestar import Controller, Request, get
from litestar.di import NamedDependency
from litestar.response import Response, Template

from app.health import check_health
from app.resources import Resources


class HealthController(Controller):
    @get("/health", name="health", cache=False, exclude_from_csrf=True)
    async def health(self, resources: NamedDependency[Resources]) -> Response[dict[str, Any]]:
        report = await check_health(resources)
        return Response(
            report.as_json(),
            status_code=200 if report.ok else 503,
            headers={"Cache-Control": "no-store"},
        )

    @get("/health/live", name="health_live", cache=False)
    async def live(self) -> dict[str, str]:
        """The process answers: for container checks that must not depend on the worker."""
        return {"status": "ok"}

    @get("/status/badge", name="status_badge", cache=False)
    async def badge(
        self, request: Request[Any, Any, Any], resources: NamedDependency[Resources]
    ) -> Template:
        report = await check_health(resources)
        return Template(
            "partials/status_badge.html",
            context={"health": report},
            headers={"Cache-Control": "no-store"},
        )
