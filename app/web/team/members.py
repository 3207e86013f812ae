"""The Team page's member forms: change someone's role, remove someone (owners and admins,
within `app.workspaces.roles`), and Leave (anyone but the last owner).

Leaving moves the browser's session to the user's next workspace, or ends it when none is
left; the session id is rewritten in place, so a second click that raced the first still
finds a session to be answered with.
"""

from __future__ import annotations

from typing import Any

from litestar import Response, post
from litestar.di import NamedDependency
from litestar.params import FromPath
from litestar.plugins.htmx import HTMXRequest
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.current import SESSION_WORKSPACE, Viewer
from app.auth.sessions import end_session
from app.db.models import Role
from app.operations.idempotency import Finished, Refused
from app.resources import Resources
from app.web.guards import editors_only
from app.web.idempotency import idempotent, notice_response, redirect_to
from app.web.team.changes import change_team, refused
from app.workspaces.members import change_role, leave_workspace, remove_member, workspaces_of


@post("/members/{user_id:int}/role", name="team_role", status_code=200, guards=[editors_only])
async def role(
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

    return await change_team(
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


@post("/members/{user_id:int}/remove", name="team_remove", status_code=200, guards=[editors_only])
async def remove(
    request: HTMXRequest,
    viewer: NamedDependency[Viewer],
    resources: NamedDependency[Resources],
    user_id: FromPath[int],
) -> Response[Any]:
    if user_id == viewer.user_id:
        return notice_response(
            request, 422, "Nothing was changed", "To leave this workspace, use Leave."
        )

    return await change_team(
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
            return Refused(refused(request, refusal))
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
