"""A workspace's members: who is in it, changing a role, removing someone, leaving, and which
workspaces a user has.

Every change is one conditional SQL statement that carries its rule (`app.workspaces.roles`)
in its WHERE clause: the row count decides the answer, and only when it is zero does a read
explain why. So a rule cannot be checked against a stale read. The statements that could take
away an owner (demote, remove, leave) first lock the workspace row (`FOR NO KEY UPDATE`, which
does not block inserts of rows referencing the workspace): two owners demoting each other at
the same moment then run one after the other, and the second statement, under a fresh
snapshot, sees that it would leave no owner.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, and_, delete, exists, false, or_, select, true, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from app.db.models import Role, User, Workspace, WorkspaceMember
from app.workspaces.roles import Problem, Refusal, may_remove, role_choices, role_of

_RANK = {Role.OWNER: 0, Role.ADMIN: 1, Role.MEMBER: 2}


@dataclass(frozen=True, slots=True)
class MemberRow:
    user_id: int
    email: str
    role: Role
    joined_at: datetime


async def list_members(session: AsyncSession, workspace_id: int) -> list[MemberRow]:
    rows = (
        await session.execute(
            select(User.id, User.email, WorkspaceMember.role, WorkspaceMember.created_at)
            .join(WorkspaceMember, WorkspaceMember.user_id == User.id)
            .where(WorkspaceMember.workspace_id == workspace_id)
            .order_by(WorkspaceMember.created_at, User.id)
        )
    ).all()
    members = [MemberRow(user_id=r[0], email=r[1], role=r[2], joined_at=r[3]) for r in rows]
    return sorted(members, key=lambda m: _RANK[m.role])


@dataclass(frozen=True, slots=True)
class WorkspaceChoice:
    id: int
    name: str
    role: Role


async def workspaces_of(session: AsyncSession, user_id: int) -> list[WorkspaceChoice]:
    """The user's workspaces, the oldest membership first (the one sign-in opens)."""
    rows = (
        await session.execute(
            select(Workspace.id, Workspace.name, WorkspaceMember.role)
            .join(WorkspaceMember, WorkspaceMember.workspace_id == Workspace.id)
            .where(WorkspaceMember.user_id == user_id)
            .order_by(WorkspaceMember.created_at, Workspace.id)
        )
    ).all()
    return [WorkspaceChoice(id=r[0], name=r[1], role=r[2]) for r in rows]


async def is_member(session: AsyncSession, workspace_id: int, user_id: int) -> bool:
    return await role_of(session, workspace_id, user_id) is not None


async def change_role(
    session: AsyncSession, *, workspace_id: int, actor_id: int, target_id: int, role: Role
) -> Refusal | None:
    """Give `target_id` the role `role`, if the actor may and an owner remains."""
    await _lock_team(session, workspace_id)
    target = aliased(WorkspaceMember, name="target")
    actor = aliased(WorkspaceMember, name="actor")
    admin_may: ColumnElement[bool] = (
        and_(actor.role == Role.ADMIN, target.role == Role.MEMBER)
        if role in (Role.ADMIN, Role.MEMBER)
        else false()
    )
    actor_may = (
        exists()
        .where(
            actor.workspace_id == workspace_id,
            actor.user_id == actor_id,
            or_(actor.role == Role.OWNER, admin_may),
        )
        .correlate(target)
    )
    changed = await session.scalar(
        update(target)
        .where(
            target.workspace_id == workspace_id,
            target.user_id == target_id,
            actor_may,
            true() if role is Role.OWNER else _keeps_an_owner(target, workspace_id),
        )
        .values(role=role)
        .returning(target.user_id)
        .execution_options(synchronize_session=False)
    )
    if changed is not None:
        return None
    return await _explain(session, workspace_id, actor_id, target_id, new_role=role)


async def remove_member(
    session: AsyncSession, *, workspace_id: int, actor_id: int, target_id: int
) -> Refusal | None:
    """Take `target_id` out of the workspace (`actor_id == target_id`: they leave)."""
    await _lock_team(session, workspace_id)
    target = aliased(WorkspaceMember, name="target")
    actor = aliased(WorkspaceMember, name="actor")
    actor_may = or_(
        target.user_id == actor_id,
        exists()
        .where(
            actor.workspace_id == workspace_id,
            actor.user_id == actor_id,
            or_(
                actor.role == Role.OWNER,
                and_(actor.role == Role.ADMIN, target.role == Role.MEMBER),
            ),
        )
        .correlate(target),
    )
    removed = await session.scalar(
        delete(target)
        .where(
            target.workspace_id == workspace_id,
            target.user_id == target_id,
            actor_may,
            _keeps_an_owner(target, workspace_id),
        )
        .returning(target.user_id)
        .execution_options(synchronize_session=False)
    )
    if removed is not None:
        return None
    return await _explain(session, workspace_id, actor_id, target_id, new_role=None)


async def leave_workspace(
    session: AsyncSession, *, workspace_id: int, user_id: int
) -> Refusal | None:
    return await remove_member(
        session, workspace_id=workspace_id, actor_id=user_id, target_id=user_id
    )


def _keeps_an_owner(target: type[WorkspaceMember], workspace_id: int) -> ColumnElement[bool]:
    """True unless the target row is the workspace's only owner."""
    other = aliased(WorkspaceMember, name="other_owner")
    return or_(
        target.role != Role.OWNER,
        exists()
        .where(
            other.workspace_id == workspace_id,
            other.role == Role.OWNER,
            other.user_id != target.user_id,
        )
        .correlate(target),
    )


async def _lock_team(session: AsyncSession, workspace_id: int) -> None:
    """Serialise changes that could take away an owner, per workspace, until commit."""
    await session.execute(
        select(Workspace.id).where(Workspace.id == workspace_id).with_for_update(key_share=True)
    )


async def _explain(
    session: AsyncSession,
    workspace_id: int,
    actor_id: int,
    target_id: int,
    *,
    new_role: Role | None,
) -> Refusal:
    """Why a role change (`new_role`) or a removal (None) changed nothing."""
    target = await role_of(session, workspace_id, target_id)
    if target is None:
        return Refusal(Problem.NOT_FOUND, "No such member in this workspace.")
    actor = await role_of(session, workspace_id, actor_id)
    is_self = actor_id == target_id
    if new_role is None:
        allowed = actor is not None and may_remove(actor, target, is_self=is_self)
    else:
        allowed = actor is not None and new_role in role_choices(actor, target)
    if not allowed:
        if new_role is Role.OWNER:
            return Refusal(Problem.FORBIDDEN, "Only an owner can make someone an owner.")
        if actor is None or not actor.can_change:
            return Refusal(Problem.FORBIDDEN, "Only owners and admins can change the team.")
        doing = "remove" if new_role is None else "change the role of"
        return Refusal(Problem.FORBIDDEN, f"Only an owner can {doing} an admin or an owner.")
    if is_self and new_role is None:
        message = "You are the only owner. Make someone else an owner before you leave."
    elif new_role is None:
        message = "This is the workspace's only owner: make someone else an owner first."
    else:
        message = "A workspace needs an owner: make someone else an owner first."
    return Refusal(Problem.LAST_OWNER, message)
