"""The "Share a report" card on the campaign page: what it draws, for the page and for the
htmx answers of its forms (`app.web.campaigns.report_links`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from litestar.response import Template
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.current import Viewer
from app.db.models import Role
from app.delivery_log.report_links import MAX_ACTIVE_LINKS, active_links
from app.web.campaigns.common import NO_STORE

CARD_TEMPLATE = "campaigns/_report_links.html"


@dataclass(frozen=True, slots=True)
class NewReportLink:
    url: str
    created_at: datetime


async def report_links_context(
    session: AsyncSession,
    viewer: Viewer,
    campaign_id: int,
    *,
    new_link: NewReportLink | None = None,
    shared: int | None = None,
) -> dict[str, Any]:
    """What the card draws: owners get the links and the forms, others a sentence."""
    is_owner = viewer.role is Role.OWNER
    links = (
        await active_links(session, workspace_id=viewer.workspace_id, campaign_id=campaign_id)
        if is_owner
        else []
    )
    return {
        "report_campaign_id": campaign_id,
        "report_owner": is_owner,
        "report_links": links,
        "report_full": len(links) >= MAX_ACTIVE_LINKS,
        "report_max": MAX_ACTIVE_LINKS,
        "new_report": new_link,
        # A repeat of the create form: the link exists, its address was shown once.
        "report_made_again": is_owner and any(link.id == shared for link in links),
    }


async def card(
    session: AsyncSession, viewer: Viewer, campaign_id: int, new_link: NewReportLink | None = None
) -> Template:
    context = await report_links_context(session, viewer, campaign_id, new_link=new_link)
    return Template(CARD_TEMPLATE, context=context, headers=NO_STORE)
