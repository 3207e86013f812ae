"""The signed-in landing page: a short overview of the workspace's accounts and campaigns.

Visitors who are not signed in are sent to the sign-in page (by the `viewer` dependency).
"""

from __future__ import annotations

from litestar import get
from litestar.di import NamedDependency
from litestar.response import Template
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.current import Viewer
from app.campaigns.service import count_by_status
from app.db.models import AccountStatus
from app.instagram.accounts import list_accounts


@get("/", name="home")
async def home(
    viewer: NamedDependency[Viewer], db_session: NamedDependency[AsyncSession]
) -> Template:
    accounts = await list_accounts(db_session, viewer.workspace_id)
    connected = [a for a in accounts if a.status is not AccountStatus.DISCONNECTED]
    return Template(
        "home.html",
        context={
            "accounts": connected,
            "attention": [a for a in connected if a.effective_status() != "active"],
            "campaigns": {
                status.value: count
                for status, count in (
                    await count_by_status(db_session, viewer.workspace_id)
                ).items()
            },
            "can_change": viewer.can_change,
        },
        headers={"Cache-Control": "no-store"},
    )
