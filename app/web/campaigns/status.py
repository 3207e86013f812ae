"""The status buttons of a campaign (on the list and in the editor): activate, pause,
archive, duplicate. Owners and admins only.

Each is an idempotent form: the change is one conditional statement (`app.campaigns.service`)
and the answer a redirect. A refusal is a redirect too, to where the person can act on it:
an incomplete campaign to the editor with the missing fields marked, a disconnected account
to the Accounts page; a campaign already in that state goes back to where the button was.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from litestar import Response, post
from litestar.di import NamedDependency
from litestar.params import FromPath
from litestar.plugins.htmx import HTMXRequest
from litestar.response import Redirect
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.current import Viewer
from app.campaigns.service import (
    Problem,
    Refusal,
    activate_campaign,
    archive_campaign,
    duplicate_campaign,
    pause_campaign,
)
from app.operations.idempotency import Finished, Refused
from app.resources import Resources
from app.web.campaigns.common import campaign_not_found
from app.web.guards import editors_only
from app.web.idempotency import idempotent, redirect_to

StatusChange = Callable[[AsyncSession, int, int], Awaitable[Refusal | None]]


@post(
    "/{campaign_id:int}/activate", name="campaign_activate", status_code=200, guards=[editors_only]
)
async def activate(
    request: HTMXRequest,
    viewer: NamedDependency[Viewer],
    resources: NamedDependency[Resources],
    campaign_id: FromPath[int],
) -> Response[Any]:
    return await _change_status(
        request,
        viewer,
        resources,
        campaign_id=campaign_id,
        scope="campaign.activate",
        change=activate_campaign,
    )


@post("/{campaign_id:int}/pause", name="campaign_pause", status_code=200, guards=[editors_only])
async def pause(
    request: HTMXRequest,
    viewer: NamedDependency[Viewer],
    resources: NamedDependency[Resources],
    campaign_id: FromPath[int],
) -> Response[Any]:
    return await _change_status(
        request,
        viewer,
        resources,
        campaign_id=campaign_id,
        scope="campaign.pause",
        change=pause_campaign,
    )


@post("/{campaign_id:int}/archive", name="campaign_archive", status_code=200, guards=[editors_only])
async def archive(
    request: HTMXRequest,
    viewer: NamedDependency[Viewer],
    resources: NamedDependency[Resources],
    campaign_id: FromPath[int],
) -> Response[Any]:
    return await _change_status(
        request,
        viewer,
        resources,
        campaign_id=campaign_id,
        scope="campaign.archive",
        change=archive_campaign,
    )


@post(
    "/{campaign_id:int}/duplicate",
    name="campaign_duplicate",
    status_code=200,
    guards=[editors_only],
)
async def duplicate(
    request: HTMXRequest,
    viewer: NamedDependency[Viewer],
    resources: NamedDependency[Resources],
    campaign_id: FromPath[int],
) -> Response[Any]:
    async def action(session: AsyncSession) -> Finished:
        copy_id = await duplicate_campaign(
            session,
            workspace_id=viewer.workspace_id,
            campaign_id=campaign_id,
            user_id=viewer.user_id,
        )
        if copy_id is None:
            raise campaign_not_found()
        return redirect_to(f"/campaigns/{copy_id}?notice=copied")

    return await idempotent(request, resources, viewer, scope="campaign.duplicate", action=action)


async def _change_status(
    request: HTMXRequest,
    viewer: Viewer,
    resources: Resources,
    *,
    campaign_id: int,
    scope: str,
    change: StatusChange,
) -> Response[Any]:
    """Run one status change (activate, pause, archive) as an idempotent form."""
    form = await request.form()
    back = "/campaigns" if scope == "campaign.archive" else _back(form, campaign_id)

    async def action(session: AsyncSession) -> Finished | Refused[Response[Any]]:
        refusal = await change(session, viewer.workspace_id, campaign_id)
        if refusal is None:
            return redirect_to(back)
        if refusal.problem is Problem.NOT_FOUND:
            raise campaign_not_found()
        if refusal.problem is Problem.INCOMPLETE:
            back_to = f"/campaigns/{campaign_id}?check=1"  # the editor says what is missing
        elif refusal.problem is Problem.ACCOUNT_DISCONNECTED:
            back_to = "/accounts?reconnect=1"
        else:
            back_to = back  # already in that state, or one that does not allow it
        return Refused(Redirect(back_to, status_code=303))

    return await idempotent(request, resources, viewer, scope=scope, action=action)


def _back(form: Mapping[str, Any], campaign_id: int) -> str:
    return "/campaigns" if form.get("back") == "list" else f"/campaigns/{campaign_id}"
