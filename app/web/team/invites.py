"""The Team page's invite forms: make an invite (owners and admins), revoke one.

An invite's link is drawn once, on the answer to the form that made it: only its hash is
stored, so a repeat of that form (a reload, a double click) gets the page without the link,
saying so. The invitee's side of the link is `app.web.invite_link`.
"""

from __future__ import annotations

from typing import Any

from litestar import Response, post
from litestar.di import NamedDependency
from litestar.params import FromPath
from litestar.plugins.htmx import HTMXRequest
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.current import Viewer
from app.operations.idempotency import Finished, Refused
from app.resources import Resources
from app.web.guards import editors_only
from app.web.idempotency import idempotent, redirect_to
from app.web.team.changes import change_team, refused
from app.web.team.page import FormState, NewInvite, team_page
from app.workspaces.invites import (
    InviteCreated,
    check_invite_input,
    create_invite,
    invite_link,
    revoke_invite,
)


@post("/invites", name="team_invite", status_code=200, guards=[editors_only])
async def invite(
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
        return await team_page(request, db_session, viewer, form=form, status_code=422)
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
            return Refused(refused(request, result))
        form.errors = {result.field: result.message}
        return Refused(await team_page(request, db_session, viewer, form=form, status_code=422))

    async def mark_ran() -> None:
        ran.append(True)

    response = await idempotent(
        request, resources, viewer, scope="team.invite", action=action, after_commit=mark_ran
    )
    if not (ran and made):
        return response  # a refusal, or a repeat: the link is not shown again
    created = made[0]
    return await team_page(
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


@post("/invites/{invite_id:int}/revoke", name="team_revoke", status_code=200, guards=[editors_only])
async def revoke(
    request: HTMXRequest,
    viewer: NamedDependency[Viewer],
    resources: NamedDependency[Resources],
    invite_id: FromPath[int],
) -> Response[Any]:
    return await change_team(
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
