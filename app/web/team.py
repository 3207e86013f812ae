"""The Team page (members, open invites, inviting, roles, removing, leaving) and the workspace
switcher. The rules live in `app.workspaces` (roles, members, invites); these handlers turn their
answers into pages.

Everyone in the workspace sees the page; owners and admins change things (members get 403 on
the forms and see the buttons disabled). Every form carries a CSRF token and a one-time key
(`app.web.idempotency`). An invite's link is drawn once, on the answer to the form that made it:
only its hash is stored, so a repeat of that form (a reload, a double click) gets the page
without the link, saying so.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from litestar import Controller, Response, get, post
from litestar.di import NamedDependency
from litestar.exceptions import NotFoundException
from litestar.params import FromPath, FromQuery
from litestar.plugins.htmx import HTMXRequest
from litestar.response import Template
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.current import SESSION_WORKSPACE, Viewer
from app.auth.sessions import end_session
from app.db.models import Role
from app.operations.idempotency import Finished, Refused
from app.resources import Resources
from app.web.guards import editors_only
from app.web.htmx import wants_partial
from app.web.idempotency import idempotent, notice_response, redirect_to
from app.workspaces.invites import (
    INVITABLE_ROLES,
    InviteCreated,
    check_invite_input,
    create_invite,
    invite_link,
    list_open_invites,
    revoke_invite,
)
from app.workspaces.members import (
    MemberRow,
    change_role,
    leave_workspace,
    list_members,
    remove_member,
    workspaces_of,
)
from app.workspaces.roles import Problem, Refusal, may_remove, role_choices

_NO_STORE = {"Cache-Control": "no-store"}
ROLE_NOTE = "Your role lets you see the team; owners and admins invite people and change roles."
_NOTICES = {
    "revoked": "Invite revoked: its link no longer works.",
    "role": "Role changed.",
    "removed": "Removed. They no longer have access to this workspace.",
    "left": "You left that workspace.",
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


async def _team_page(
    request: HTMXRequest,
    session: AsyncSession,
    viewer: Viewer,
    *,
    form: FormState | None = None,
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
    }
    template = "team/_body.html" if wants_partial(request) else "team/index.html"
    return Template(template, context=context, status_code=status_code, headers=_NO_STORE)


def _refused(request: HTMXRequest, refusal: Refusal) -> Response[Any]:
    if refusal.problem is Problem.NOT_FOUND:
        raise NotFoundException(refusal.message)
    if refusal.problem is Problem.FORBIDDEN:
        return notice_response(request, 403, "Not allowed", refusal.message)
    if refusal.problem is Problem.LAST_OWNER:
        return notice_response(request, 409, "A workspace needs an owner", refusal.message)
    return notice_response(request, 422, "Nothing was changed", refusal.message)


async def _change_team(
    request: HTMXRequest,
    resources: Resources,
    viewer: Viewer,
    *,
    scope: str,
    done: str,
    change: Callable[[AsyncSession], Awaitable[Refusal | None]],
) -> Response[Any]:
    """Run one change of the team under the form's one-time key: a refusal becomes a notice,
    success goes back to the Team page saying `done` (a key of `_NOTICES`)."""

    async def action(session: AsyncSession) -> Finished | Refused[Response[Any]]:
        refusal = await change(session)
        if refusal is not None:
            return Refused(_refused(request, refusal))
        return redirect_to(f"/team?notice={done}")

    return await idempotent(request, resources, viewer, scope=scope, action=action)


class TeamController(Controller):
    path = "/team"

    @get("/", name="team")
    async def index(
        self,
        *,
        request: HTMXRequest,
        viewer: NamedDependency[Viewer],
        db_session: NamedDependency[AsyncSession],
        notice: FromQuery[str | None] = None,
        invited: FromQuery[int | None] = None,
    ) -> Template:
        message = _NOTICES.get(notice or "")
        if notice == "left":
            message = f"You left that workspace. You are now in {viewer.workspace_name}."
        return await _team_page(request, db_session, viewer, notice=message, invited=invited)

    @post("/invites", name="team_invite", status_code=200, guards=[editors_only])
    async def invite(
        self,
        request: HTMXRequest,
        viewer: NamedDependency[Viewer],
        resources: NamedDependency[Resources],
        db_session: NamedDependency[AsyncSession],
    ) -> Response[Any]:
        raw = await request.form()
        email, role, errors = check_invite_input(
            str(raw.get("email") or ""), str(raw.get("role") or "")
        )
        form = FormState(values={"email": email, "role": role.value if role else ""})
        if errors or role is None:
            form.errors = errors
            return await _team_page(request, db_session, viewer, form=form, status_code=422)
        made: list[InviteCreated] = []
        ran: list[bool] = []

        async def action(session: AsyncSession) -> Finished | Refused[Response[Any]]:
            result = await create_invite(
                session,
                workspace_id=viewer.workspace_id,
                inviter_id=viewer.user_id,
                email=email,
                role=role,
            )
            if isinstance(result, InviteCreated):
                made.append(result)
                return redirect_to(f"/team?invited={result.invite_id}")
            if result.field is None:
                return Refused(_refused(request, result))
            form.errors = {result.field: result.message}
            return Refused(
                await _team_page(request, db_session, viewer, form=form, status_code=422)
            )

        async def mark_ran() -> None:
            ran.append(True)

        response = await idempotent(
            request, resources, viewer, scope="team.invite", action=action, after_commit=mark_ran
        )
        if not (ran and made):
            return response  # a refusal, or a repeat: the link is not shown again
        created = made[0]
        return await _team_page(
            request,
            db_session,
            viewer,
            new_invite=NewInvite(
                link=invite_link(resources.settings.public_base_url, created.token),
                email=created.email,
                role=created.role,
                expires_at=created.expires_at,
            ),
        )

    @post(
        "/invites/{invite_id:int}/revoke",
        name="team_revoke",
        status_code=200,
        guards=[editors_only],
    )
    async def revoke(
        self,
        request: HTMXRequest,
        viewer: NamedDependency[Viewer],
        resources: NamedDependency[Resources],
        invite_id: FromPath[int],
    ) -> Response[Any]:
        return await _change_team(
            request,
            resources,
            viewer,
            scope="team.revoke",
            done="revoked",
            change=lambda session: revoke_invite(
                session,
                workspace_id=viewer.workspace_id,
                actor_id=viewer.user_id,
                invite_id=invite_id,
            ),
        )

    @post("/members/{user_id:int}/role", name="team_role", status_code=200, guards=[editors_only])
    async def role(
        self,
        request: HTMXRequest,
        viewer: NamedDependency[Viewer],
        resources: NamedDependency[Resources],
        user_id: FromPath[int],
    ) -> Response[Any]:
        raw = await request.form()
        try:
            new_role = Role(str(raw.get("role") or ""))
        except ValueError:
            return notice_response(
                request, 422, "Nothing was changed", "Choose owner, admin or member."
            )

        return await _change_team(
            request,
            resources,
            viewer,
            scope="team.role",
            done="role",
            change=lambda session: change_role(
                session,
                workspace_id=viewer.workspace_id,
                actor_id=viewer.user_id,
                target_id=user_id,
                role=new_role,
            ),
        )

    @post(
        "/members/{user_id:int}/remove", name="team_remove", status_code=200, guards=[editors_only]
    )
    async def remove(
        self,
        request: HTMXRequest,
        viewer: NamedDependency[Viewer],
        resources: NamedDependency[Resources],
        user_id: FromPath[int],
    ) -> Response[Any]:
        if user_id == viewer.user_id:
            return notice_response(
                request, 422, "Nothing was changed", "To leave this workspace, use Leave."
            )

        return await _change_team(
            request,
            resources,
            viewer,
            scope="team.remove",
            done="removed",
            change=lambda session: remove_member(
                session,
                workspace_id=viewer.workspace_id,
                actor_id=viewer.user_id,
                target_id=user_id,
            ),
        )

    @post("/leave", name="team_leave", status_code=200)
    async def leave(
        self,
        request: HTMXRequest,
        viewer: NamedDependency[Viewer],
        resources: NamedDependency[Resources],
    ) -> Response[Any]:
        moved_to: list[int | None] = []

        async def action(session: AsyncSession) -> Finished | Refused[Response[Any]]:
            refusal = await leave_workspace(
                session, workspace_id=viewer.workspace_id, user_id=viewer.user_id
            )
            if refusal is not None:
                return Refused(_refused(request, refusal))
            remaining = await workspaces_of(session, viewer.user_id)
            moved_to.append(remaining[0].id if remaining else None)
            return redirect_to("/team?notice=left" if remaining else "/team/left")

        async def move_session() -> None:
            # The same session id, rewritten in place: a second click that raced this one
            # still finds a session to be answered with.
            if moved_to and moved_to[0] is not None:
                request.set_session({**request.session, SESSION_WORKSPACE: moved_to[0]})
            else:
                end_session(request)

        return await idempotent(
            request, resources, viewer, scope="team.leave", action=action, after_commit=move_session
        )

    @get("/left", name="team_left")
    async def left(self) -> Template:
        return Template("team/left.html", headers=_NO_STORE)


class WorkspaceSwitchController(Controller):
    path = "/workspaces"

    @post("/switch", name="workspace_switch", status_code=200)
    async def switch(
        self,
        request: HTMXRequest,
        viewer: NamedDependency[Viewer],
        resources: NamedDependency[Resources],
    ) -> Response[Any]:
        raw = await request.form()
        try:
            workspace_id = int(str(raw.get("workspace_id") or ""))
        except ValueError:
            raise NotFoundException("No such workspace.") from None

        async def action(session: AsyncSession) -> Finished:
            # The viewer, loaded for this request, already lists the user's workspaces.
            if all(workspace.id != workspace_id for workspace in viewer.workspaces):
                raise NotFoundException("No such workspace.")
            return redirect_to("/")

        async def rewrite_session() -> None:
            request.set_session({**request.session, SESSION_WORKSPACE: workspace_id})

        return await idempotent(
            request,
            resources,
            viewer,
            scope="workspace.switch",
            action=action,
            after_commit=rewrite_session,
        )
