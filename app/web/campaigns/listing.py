"""The campaign list: every campaign of the workspace with its status and today's DM counts,
or the archived ones (`?archived=1`)."""

from __future__ import annotations

from datetime import UTC, datetime

from litestar import get
from litestar.di import NamedDependency
from litestar.params import FromQuery
from litestar.response import Template
from sqlalchemy.ext.asyncio import AsyncSession

from app.accounts.cards import list_usable_accounts
from app.auth.current import Viewer
from app.campaigns.service import list_campaigns
from app.web.campaigns.common import NO_STORE


@get("/", name="campaigns")
async def campaign_list(
    viewer: NamedDependency[Viewer],
    db_session: NamedDependency[AsyncSession],
    archived: FromQuery[bool] = False,
) -> Template:
    campaigns = await list_campaigns(db_session, viewer.workspace_id, archived=archived)
    accounts = await list_usable_accounts(db_session, viewer.workspace_id)
    return Template(
        "campaigns/index.html",
        context={
            "campaigns": campaigns,
            "archived": archived,
            "has_accounts": bool(accounts),
            "can_change": viewer.can_change,
            "today": datetime.now(UTC).date().isoformat(),
        },
        headers=NO_STORE,
    )
