"""The signed-in landing page: today's deliveries per account, duplicates blocked, the queue
and recent operational events (what used to be the placeholder home).

The numbers refresh themselves every 10 s (htmx polling of the same URL, which answers with
just the overview section; `Vary: HX-Request`). The charts of DMs and link taps show the
range `?range=` asks for (`app.delivery_log.charts.Span`); its switch swaps the same section.
Visitors who are not signed in are sent to the sign-in page by the `viewer` dependency.
"""

from __future__ import annotations

from datetime import UTC, datetime

from litestar.di import NamedDependency
from litestar.plugins.htmx import HTMXRequest
from litestar.response import Template
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.current import Viewer
from app.auth.throttle import LoginThrottle
from app.campaigns.service import count_by_status
from app.db.models import AccountStatus
from app.delivery_log.charts import Span, parse_span, timeline
from app.delivery_log.overview import load_overview
from app.delivery_log.surge import load_surges
from app.health import check_health
from app.resources import Resources
from app.setup_doctor.run import overview_failures
from app.web.htmx import wants_partial
from app.web.reads import get_or_head
from app.workspaces.time_zone import start_of_day, zone_or_utc

# Wrong passwords in a day before the owner is told: past a typo or two of their own.
ATTACK_NOTICE_AT = 5


@get_or_head("/", name="home")
async def home(
    request: HTMXRequest,
    viewer: NamedDependency[Viewer],
    resources: NamedDependency[Resources],
    db_session: NamedDependency[AsyncSession],
) -> Template:
    zone = zone_or_utc(viewer.time_zone)
    overview = await load_overview(db_session, viewer.workspace_id, start_of_day(zone))
    now = datetime.now(UTC)
    chart = await timeline(
        db_session,
        workspace_id=viewer.workspace_id,
        # Opens on the last 24 hours: the overview is about today, and it re-reads every 10 s.
        span=parse_span(request.query_params.get("range"), Span.HOURS),
        zone=zone,
        now=now,
    )
    health = await check_health(resources)
    connected = [a for a in overview.accounts if a.status is not AccountStatus.DISCONNECTED]
    campaigns = await count_by_status(db_session, viewer.workspace_id)
    context = {
        "surges": await load_surges(db_session, resources, viewer.workspace_id),
        "o": overview,
        "health": health,
        "accounts": connected,
        "attention": [a for a in connected if a.effective_status() != "active"],
        "campaigns": {status.value: count for status, count in campaigns.items()},
        "can_change": viewer.can_change,
        # The log's date filter is in UTC days: from the UTC day the workspace's day began in,
        # so the link's list holds all of today (and, east of UTC, the evening before).
        "today": overview.day.astimezone(UTC).date(),
        "now": now,
        "timeline": chart,
        "time_zone": viewer.time_zone,
        "viewer_email": viewer.email,
        "sign_in_failures": await _sign_in_failures(resources, viewer.email),
    }
    partial = wants_partial(request)
    if not partial:
        # Only on a full load: the 10 s refresh swaps the numbers, not this link.
        context["doctor_failures"] = await overview_failures(
            resources, db_session, viewer.workspace_id
        )
    return Template(
        "overview/_body.html" if partial else "overview/index.html",
        context=context,
        headers={"Cache-Control": "no-store", "Vary": "HX-Request"},
    )


async def _sign_in_failures(resources: Resources, email: str) -> int:
    """Wrong passwords tried for this email in the last day, when that many look like an
    attack (0 otherwise)."""
    failures = await LoginThrottle(resources.redis).recent_failures(email)
    return failures if failures >= ATTACK_NOTICE_AT else 0
