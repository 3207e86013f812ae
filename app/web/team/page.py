"""The Team page: the members with their roles, the open invites, the invite form, Leave.

Everyone in the workspace sees it; owners and admins get working buttons, members see them
disabled with the reason. The forms (`app.web.team.invites`, `app.web.team.members`) answer
with this page again: the whole page, or only its body when htmx asked (the invite form swaps
it in place).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from litestar.di import NamedDependency
from litestar.params import FromQuery
from litestar.plugins.htmx import HTMXRequest
from litestar.response import Template
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.current import Viewer
from app.db.models import Role
from app.web.htmx import wants_partial
from app.web.reads import get_or_head
from app.workspaces.invites import INVITABLE_ROLES, list_open_invites
from app.workspaces.members import MemberRow, list_members
from app.workspaces.roles import may_remove, role_choices
from app.workspaces.time_zone import ZONE_NAMES

NO_STORE = {"Cache-Control": "no-store"}
ROLE_NOTE = "Your role lets you see the team; owners and admins invite people and change roles."
# What a finished change says on the page it lands on (`/team?notice=…`).
NOTICES = {
    "revoked": "Invite revoked: its link no longer works.",
    "role": "Role changed.",
    "removed": "Removed. They no longer have access to this workspace.",
    "left": "You left that workspace.",
    "time_zone": "Time zone saved: the dashboard shows times in it.",
}


@dataclass(frozen=True, slots=True)
class MemberView:
    member: MemberRow
    is_self: bool
    choices: list[Role]
    can_remove: bool
    why_not: str


@dataclass(frozen=True, slots=True)
class NewInvite:
    link: str
    email: str
    role: Role
    expires_at: datetime


@dataclass
class FormState:
    values: dict[str, str] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)


@get_or_head("/", name="team")
async def team(
    *,
    request: HTMXRequest,
    viewer: NamedDependency[Viewer],
    db_session: NamedDependency[AsyncSession],
    notice: FromQuery[str | None] = None,
    invited: FromQuery[int | None] = None,
) -> Template:
    message = NOTICES.get(notice or "")
    if notice == "left":
        message = f"You left that workspace. You are now in {viewer.workspace_name}."
    return await team_page(request, db_session, viewer, notice=message, invited=invited)


@get_or_head("/left", name="team_left")
async def left() -> Template:
    """Where someone lands after leaving their last workspace."""
    return Template("team/left.html", headers=NO_STORE)


async def team_page(
    request: HTMXRequest,
    session: AsyncSession,
    viewer: Viewer,
    *,
    form: FormState | None = None,
    zone_form: FormState | None = None,
    new_invite: NewInvite | None = None,
    notice: str | None = None,
    invited: int | None = None,
    status_code: int = 200,
) -> Template:
    """The Team page, or only its body when htmx asked (the invite form swaps it in place).
    `invited`: the invite just made by a form whose answer was not the link (a repeat)."""
    members = await list_members(session, viewer.workspace_id)
    owners = sum(1 for m in members if m.role is Role.OWNER)
    invites = await list_open_invites(session, viewer.workspace_id)
    made = next((invite for invite in invites if invite.id == invited), None)
    if made is not None:
        notice = (
            f"The invite for {made.email} is made. Its link was shown once, when it "
            "was made; if it was not copied, revoke the invite and make a new one."
        )
    form = form or FormState()
    zone_form = zone_form or FormState(values={"time_zone": viewer.time_zone})
    context = {
        "workspace_name": viewer.workspace_name,
        "members": _member_views(viewer, members, owners),
        "invites": invites,
        "can_change": viewer.can_change,
        "can_leave": not (viewer.role is Role.OWNER and owners <= 1),
        "role_note": ROLE_NOTE,
        "invite_roles": list(INVITABLE_ROLES),
        "values": form.values,
        "errors": form.errors,
        "new_invite": new_invite,
        "notice": notice,
        "zone_values": zone_form.values,
        "zone_errors": zone_form.errors,
        "zone_names": ZONE_NAMES,
    }
    template = "team/_body.html" if wants_partial(request) else "team/index.html"
    return Template(template, context=context, status_code=status_code, headers=NO_STORE)


def _member_views(viewer: Viewer, members: list[MemberRow], owners: int) -> list[MemberView]:
    views = []
    for m in members:
        is_self = m.user_id == viewer.user_id
        last_owner = m.role is Role.OWNER and owners == 1
        choices = [] if last_owner else role_choices(viewer.role, m.role)
        if last_owner:
            why_not = "The only owner: make someone else an owner first."
        elif not viewer.can_change:
            why_not = ROLE_NOTE
        else:
            why_not = "Only an owner can change or remove an admin or an owner."
        views.append(
            MemberView(
                member=m,
                is_self=is_self,
                choices=choices,
                can_remove=not is_self
                and not last_owner
                and may_remove(viewer.role, m.role, is_self=False),
                why_not=why_not,
            )
        )
    return views
