"""Creating a workspace for a new user; the sign-up page and the CLI call this."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.users import create_user, normalize_email
from app.db.models import Role, Workspace, WorkspaceMember
from app.workspaces.time_zone import DEFAULT_ZONE


@dataclass(frozen=True, slots=True)
class NewUser:
    user_id: int
    workspace_id: int


async def create_user_with_workspace(
    session: AsyncSession,
    *,
    email: str,
    password: str,
    workspace_name: str | None = None,
    time_zone: str = DEFAULT_ZONE,
) -> NewUser:
    """Create a user who owns a new workspace, in the caller's transaction."""
    email = normalize_email(email)
    user_id = await create_user(session, email=email, password=password)
    workspace = Workspace(
        name=(workspace_name or f"{email.split('@')[0]}'s workspace")[:100], time_zone=time_zone
    )
    session.add(workspace)
    await session.flush()
    session.add(WorkspaceMember(workspace_id=workspace.id, user_id=user_id, role=Role.OWNER))
    await session.flush()
    return NewUser(user_id=user_id, workspace_id=workspace.id)
