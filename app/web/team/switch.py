"""The workspace switcher in the header: open another of the user's workspaces.

The session is rewritten in place onto the chosen workspace, after the one-time key's commit;
a workspace the user is not in is "not found".
"""

from __future__ import annotations

from typing import Any

from litestar import Response, post
from litestar.di import NamedDependency
from litestar.exceptions import NotFoundException
from litestar.plugins.htmx import HTMXRequest
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.current import SESSION_WORKSPACE, Viewer
from app.db.bounds import parse_id
from app.operations.idempotency import Finished
from app.resources import Resources
from app.web.idempotency import idempotent, redirect_to


@post("/workspaces/switch", name="workspace_switch", status_code=200)
async def switch_workspace(
    request: HTMXRequest,
    viewer: NamedDependency[Viewer],
    resources: NamedDependency[Resources],
) -> Response[Any]:
    raw = await request.form()
    workspace_id = parse_id(raw.get("workspace_id"))
    if workspace_id is None:
        raise NotFoundException("No such workspace.")

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
