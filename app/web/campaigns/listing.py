"""The campaign list: every campaign of the workspace with its status and today's DM counts,
or the archived ones (`?archived=1`)."""

from __future__ import annotations

from datetime import UTC

from litestar.di import NamedDependency
from litestar.params import FromQuery
from litestar.response import Template
from sqlalchemy.ext.asyncio import AsyncSession

from app.accounts.cards import list_usable_accounts
from app.auth.current import Viewer
from app.campaigns.service import list_campaigns
from app.web.campaigns.common import NO_STORE
from app.web.reads import get_or_head
from app.workspaces.time_zone import start_of_day, zone_or_utc


@get_or_head("/", name="campaigns")
async def campaign_list(
    viewer: NamedDependency[Viewer],
    db_session: NamedDependency[AsyncSession],
    archived: FromQuery[bool] = False,
) -> Template:
    day = start_of_day(zone_or_utc(viewer.time_zone))
    campaigns = await list_campaigns(db_session, viewer.workspace_id, archived=archived, since=day)
    accounts = await list_usable_accounts(db_session, viewer.workspace_id)
    return Template(
        "campaigns/index.html",
        context={
            "campaigns": campaigns,
            "archived": archived,
            "has_accounts": bool(accounts),
            "can_change": viewer.can_change,
            # The log's date filter is in UTC days (see app.web.overview).
            "today": day.astimezone(UTC).date().isoformat(),
        },
        headers=NO_STORE,
    )
