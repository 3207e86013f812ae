"""The Team screens under `/team`, one module each: the page (`page`), its invite forms
(`invites`), its member forms (`members`, Leave included), the workspace's time zone
(`time_zone`), and the header's workspace
switcher (`switch`, at `/workspaces/switch`). The rules live in `app.workspaces` (roles,
members, invites); these handlers turn their answers into pages.

Everyone in the workspace sees the page; owners and admins change things (members get 403 on
the forms and see the buttons disabled). Every form carries a CSRF token and a one-time key
(`app.web.idempotency`).
"""

from __future__ import annotations

from litestar import Router

from app.web.team import invites, members, page, time_zone
from app.web.team.switch import switch_workspace

team_router = Router(
    path="/team",
    route_handlers=[
        page.team,
        page.left,
        invites.invite,
        invites.revoke,
        members.role,
        members.remove,
        members.leave,
        time_zone.time_zone,
    ],
)

__all__ = ["switch_workspace", "team_router"]
