"""The campaign page's "Share a report" card: owners make and revoke read-only links to the
campaign's report (`app.delivery_log.report_links`); the page itself is `app.web.report`.

A link's address is drawn once, on the answer to the form that made it: only its hash is
stored, so a repeat of that form (a reload, a double click) lands on the campaign page saying
the link was made and shown once. With htmx both forms swap the card in place; without
JavaScript they answer with the whole campaign page.
"""

from __future__ import annotations

from typing import Any

from litestar import Response, post
from litestar.di import NamedDependency
from litestar.params import FromPath
from litestar.plugins.htmx import ClientRedirect, HTMXRequest
from litestar.response import Redirect
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.current import Viewer
from app.delivery_log.report_links import (
    MAX_ACTIVE_LINKS,
    ReportLinkCreated,
    create_report_link,
    report_url,
    revoke_report_link,
)
from app.operations.idempotency import Finished, Refused
from app.resources import Resources
from app.web.campaigns.common import campaign_not_found
from app.web.campaigns.editor import campaign_page
from app.web.campaigns.report_card import NewReportLink, card, report_links_context
from app.web.guards import owners_only
from app.web.htmx import wants_partial
from app.web.idempotency import idempotent, notice_response, redirect_to


def _is_success(response: Response[Any]) -> bool:
    return isinstance(response, Redirect | ClientRedirect)


@post(
    "/{campaign_id:int}/report-links",
    name="report_link_create",
    status_code=200,
    guards=[owners_only],
)
async def create(
    request: HTMXRequest,
    viewer: NamedDependency[Viewer],
    resources: NamedDependency[Resources],
    db_session: NamedDependency[AsyncSession],
    campaign_id: FromPath[int],
) -> Response[Any]:
    made: list[ReportLinkCreated] = []
    ran: list[bool] = []

    async def action(session: AsyncSession) -> Finished | Refused[Response[Any]]:
        created = await create_report_link(
            session,
            workspace_id=viewer.workspace_id,
            campaign_id=campaign_id,
            user_id=viewer.user_id,
        )
        if created is None:
            return Refused(await _not_created(request, session, viewer, campaign_id))
        made.append(created)
        return redirect_to(f"/campaigns/{campaign_id}?shared={created.link_id}#report-links")

    async def mark_ran() -> None:
        ran.append(True)

    response = await idempotent(
        request, resources, viewer, scope="report.create", action=action, after_commit=mark_ran
    )
    if not (ran and made):
        return response  # a refusal, or a repeat: the address is not shown again
    new_link = NewReportLink(
        url=report_url(resources.settings.public_base_url, made[0].token),
        created_at=made[0].created_at,
    )
    if wants_partial(request):
        return await card(db_session, viewer, campaign_id, new_link)
    # Without JavaScript: the whole campaign page, the new address in its card.
    return await campaign_page(request, db_session, viewer, campaign_id, new_report=new_link)


async def _not_created(
    request: HTMXRequest, session: AsyncSession, viewer: Viewer, campaign_id: int
) -> Response[Any]:
    context = await report_links_context(session, viewer, campaign_id)
    if not context["report_full"]:
        # Not the workspace's campaign (or no longer an owner): as if it did not exist.
        raise campaign_not_found()
    return notice_response(
        request,
        409,
        "Too many report links",
        f"This campaign already has {MAX_ACTIVE_LINKS} working report links. "
        "Revoke one you no longer need, then make a new one.",
    )


@post(
    "/{campaign_id:int}/report-links/{link_id:int}/revoke",
    name="report_link_revoke",
    status_code=200,
    guards=[owners_only],
)
async def revoke(
    *,
    request: HTMXRequest,
    viewer: NamedDependency[Viewer],
    resources: NamedDependency[Resources],
    db_session: NamedDependency[AsyncSession],
    campaign_id: FromPath[int],
    link_id: FromPath[int],
) -> Response[Any]:
    async def action(session: AsyncSession) -> Finished | Refused[Response[Any]]:
        if not await revoke_report_link(
            session,
            workspace_id=viewer.workspace_id,
            campaign_id=campaign_id,
            link_id=link_id,
            user_id=viewer.user_id,
        ):
            return Refused(
                notice_response(
                    request,
                    404,
                    "No such report link",
                    "This link was already revoked, or belongs to another campaign.",
                )
            )
        return redirect_to(f"/campaigns/{campaign_id}#report-links")

    response = await idempotent(request, resources, viewer, scope="report.revoke", action=action)
    if _is_success(response) and wants_partial(request):
        return await card(db_session, viewer, campaign_id)
    return response
