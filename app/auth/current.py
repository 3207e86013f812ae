"""Who is asking: the signed-in user, their current workspace and role, as dependencies.

Handlers ask for `viewer: Viewer`, any signed-in member of the workspace (members see
everything in it). Routes that change things are also guarded by `app.web.guards.editors_only`
(owners and admins only; members get 403: they may know the thing exists, they just cannot
change it), which loads the same viewer first.

The viewer is re-read from PostgreSQL on every request (once: the guard and the dependency
share it), so removing someone from a workspace or changing their role takes effect at once,
whatever their session says. Without a valid
session `LoginRequired` is raised; its handler (`app.web.errors.login_redirect`) sends people
to the sign-in page and brings them back afterwards. Objects of other workspaces are looked
up with `workspace_id` in the query and answer 404, never 403, so their existence is not
revealed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from litestar.connection import ASGIConnection
from litestar.di import NamedDependency
from litestar.exceptions import NotAuthorizedException
from litestar.plugins.htmx import HTMXRequest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.sessions import peek_session
from app.db.models import Role, User, Workspace, WorkspaceMember

SESSION_USER = "uid"
SESSION_WORKSPACE = "wid"
VIEWER_STATE_KEY = "viewer"

AnyConnection = ASGIConnection[Any, Any, Any, Any]


@dataclass(frozen=True, slots=True)
class WorkspaceRef:
    id: int
    name: str


@dataclass(frozen=True, slots=True)
class Viewer:
    user_id: int
    email: str
    workspace_id: int
    workspace_name: str
    role: Role
    # Every workspace the user belongs to, by name (the header's switcher lists them).
    workspaces: tuple[WorkspaceRef, ...] = ()
    # The workspace's IANA zone, for the times the dashboard shows (app.workspaces.time_zone).
    time_zone: str = "UTC"

    @property
    def can_change(self) -> bool:
        return self.role.can_change


class LoginRequired(NotAuthorizedException):
    """No valid session; the handler redirects to the sign-in page."""


async def load_viewer(session: AsyncSession, user_id: int, workspace_id: int) -> Viewer | None:
    """The user as a member of `workspace_id`, or None when they are not (any more)."""
    rows = (
        await session.execute(
            select(
                User.email, Workspace.id, Workspace.name, WorkspaceMember.role, Workspace.time_zone
            )
            .join(WorkspaceMember, WorkspaceMember.user_id == User.id)
            .join(Workspace, Workspace.id == WorkspaceMember.workspace_id)
            .where(User.id == user_id)
            .order_by(Workspace.name, Workspace.id)
        )
    ).all()
    current = next((row for row in rows if row[1] == workspace_id), None)
    if current is None:
        return None
    return Viewer(
        user_id=user_id,
        email=current[0],
        workspace_id=current[1],
        workspace_name=current[2],
        role=current[3],
        time_zone=current[4],
        workspaces=tuple(WorkspaceRef(id=row[1], name=row[2]) for row in rows),
    )


def session_identity(request: HTMXRequest) -> tuple[int, int] | None:
    return _identity(request.session)


def _identity(data: Mapping[str, Any]) -> tuple[int, int] | None:
    user_id, workspace_id = data.get(SESSION_USER), data.get(SESSION_WORKSPACE)
    if isinstance(user_id, int) and isinstance(workspace_id, int):
        return user_id, workspace_id
    return None


async def peek_viewer(request: HTMXRequest, session: AsyncSession) -> Viewer | None:
    """The signed-in viewer for a path that runs without the session middleware (the status
    badge): the session is read, never written."""
    identity = _identity(await peek_session(request))
    return await load_viewer(session, *identity) if identity else None


async def provide_viewer(request: HTMXRequest, db_session: NamedDependency[AsyncSession]) -> Viewer:
    return await signed_in_viewer(request, db_session)


async def signed_in_viewer(connection: AnyConnection, session: AsyncSession) -> Viewer:
    """The signed-in viewer; `LoginRequired` without one."""
    viewer = await optional_viewer(connection, session)
    if viewer is None:
        raise LoginRequired("Please sign in")
    return viewer


async def optional_viewer(connection: AnyConnection, session: AsyncSession) -> Viewer | None:
    """The signed-in viewer, else None (pages that anyone may open, such as an invite link,
    call this directly). Loaded once per request."""
    loaded = connection.state.get(VIEWER_STATE_KEY)
    if isinstance(loaded, Viewer):
        return loaded
    identity = _identity(connection.session)
    viewer = await load_viewer(session, *identity) if identity else None
    if viewer is not None:
        # Templates read it from here to draw the navigation and the user menu.
        connection.state[VIEWER_STATE_KEY] = viewer
    return viewer


def safe_next(target: str | None) -> str:
    """A same-site path to return to after sign-in; anything else becomes the dashboard."""
    if not target or not target.startswith("/") or target.startswith(("//", "/\\")):
        return "/"
    return target
