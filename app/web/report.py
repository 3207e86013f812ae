"""`/r/<token>`: a campaign's shared report, read-only, for anyone holding the link.

No sign-in and no cookie: the path is outside the session middleware and the CSRF cookie
(`app.asgi`, `app.auth.sessions.SESSIONLESS_PATHS`), and the page is drawn from its own
layout, without the dashboard's header or scripts. It shows counts only, never a commenter
(`app.delivery_log.report`): the headline numbers and the campaign page's own funnel and
charts partials (`templates/charts/`), its hours and days in the workspace's zone; the
charts' range switch is a plain link back to this page. The token is in the URL, so the
answer sends `Referrer-Policy: no-referrer` and `X-Robots-Tag: noindex`, and the log scrubs
`/r/…` paths (`app.logs`). An unknown, revoked or altered token gets a friendly 404 page,
the same for each, so it says nothing about which; so does every other address under `/r/`
(`/r/a/b`, an overlong token, a NUL): the error handlers (`app.web.errors`) answer any client
error there with this page and these headers, whatever refused it (the router, the edge
checks, the method).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from litestar import Request
from litestar.di import NamedDependency
from litestar.params import FromPath
from litestar.response import Template
from sqlalchemy.ext.asyncio import AsyncSession

from app.delivery_log.charts import parse_span
from app.delivery_log.report import load_report
from app.delivery_log.report_links import REPORT_PATH, find_shared_campaign
from app.web.reads import get_or_head
from app.workspaces.time_zone import zone_or_utc

REPORT_TEMPLATE = "reports/report.html"
NOT_FOUND_TEMPLATE = "reports/not_found.html"
HEADERS = {
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
    "X-Robots-Tag": "noindex, nofollow",
}


@get_or_head("/r/{token:str}", name="shared_report", opt={"exclude_from_csrf": True})
async def shared_report(
    request: Request[Any, Any, Any], db_session: NamedDependency[AsyncSession], token: FromPath[str]
) -> Template:
    shared = await find_shared_campaign(db_session, token)
    if shared is None:
        return _not_found()
    now = datetime.now(UTC)
    report = await load_report(
        db_session,
        workspace_id=shared.workspace_id,
        campaign_id=shared.campaign_id,
        # The charts' range switch is a plain link back here (the page loads no script).
        span=parse_span(request.query_params.get("range")),
        zone=zone_or_utc(shared.time_zone),
        now=now,
    )
    if report is None:
        return _not_found()
    return Template(
        REPORT_TEMPLATE,
        context={
            "report": report,
            "funnel": report.funnel,
            "timeline": report.timeline,
            "range_url": f"{REPORT_PATH}{token}",
            "tz": shared.time_zone,
            "now": now,
        },
        headers=HEADERS,
    )


def is_report_path(path: str) -> bool:
    """Whether an address is under `/r/`, matched by the route or not."""
    return path == REPORT_PATH.rstrip("/") or path.startswith(REPORT_PATH)


def report_not_found(status_code: int = 404, headers: Mapping[str, str] | None = None) -> Template:
    """The friendly page for a link that does not open a report; `status_code` and `headers`
    keep what refused it saying (a 405's `Allow`)."""
    return Template(
        NOT_FOUND_TEMPLATE, status_code=status_code, headers={**(headers or {}), **HEADERS}
    )


def _not_found() -> Template:
    return report_not_found()
