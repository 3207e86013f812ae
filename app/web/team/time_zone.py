"""The Team page's time-zone form: owners and admins choose the zone the workspace's dashboard
shows times in. A name that is not an IANA zone is a field error on the page (422), never a
500; a valid one is stored under the form's one-time key like every team change."""

from __future__ import annotations

import logging
from typing import Any

from litestar import Response, post
from litestar.di import NamedDependency
from litestar.plugins.htmx import HTMXRequest
from redis.exceptions import RedisError
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.current import Viewer
from app.queue import JobName, enqueue
from app.resources import Resources
from app.web.guards import editors_only
from app.web.team.changes import change_team
from app.web.team.page import FormState, team_page
from app.workspaces.roles import Refusal
from app.workspaces.time_zone import InvalidTimeZoneError, parse_zone, set_time_zone

logger = logging.getLogger("oncereply.web")


@post("/time-zone", name="team_time_zone", status_code=200, guards=[editors_only])
async def time_zone(
    request: HTMXRequest,
    viewer: NamedDependency[Viewer],
    resources: NamedDependency[Resources],
    db_session: NamedDependency[AsyncSession],
) -> Response[Any]:
    raw = str((await request.form()).get("time_zone") or "")
    try:
        zone = parse_zone(raw)
    except InvalidTimeZoneError as exc:
        form = FormState(values={"time_zone": raw[:100]}, errors={"time_zone": str(exc)})
        return await team_page(request, db_session, viewer, zone_form=form, status_code=422)

    async def change(session: AsyncSession) -> Refusal | None:
        await set_time_zone(session, viewer.workspace_id, zone)
        return None

    async def recount() -> None:
        try:
            await enqueue(
                resources.queue, JobName.RECOUNT_CLICK_DAYS, workspace_id=viewer.workspace_id
            )
        except (RedisError, OSError) as exc:
            # The zone is saved; the job's five-minute cron finds the workspace waiting.
            logger.warning("the recount after a change of zone waits for its cron: %s", exc)

    return await change_team(
        request,
        resources,
        viewer,
        scope="team.time_zone",
        done="time_zone",
        change=change,
        after_commit=recount,
    )
