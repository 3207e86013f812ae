"""Who may do what to a workspace's team, and the refusal every team change answers with.

The rules (the page, the CLI and the tests all go through these):

- owners and admins invite, as admin or member (nobody is invited as owner);
- only an owner makes someone owner, changes an owner's or an admin's role, or removes an
  admin or an owner; admins change and remove members only (and may promote a member to admin);
- a workspace always keeps an owner: nobody removes or demotes the last one, and the last
  owner cannot leave;
- anyone else may leave a workspace themselves.

`role_choices` and `may_remove` draw the page's buttons and explain a refusal; the changes
themselves (`app.workspaces.members`, `app.workspaces.invites`) carry the same rules in the
WHERE clause of their one statement, with `has_role` for "the actor is an owner or admin".
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from sqlalchemy import ColumnElement, exists, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from app.db.models import Role, WorkspaceMember


class Problem(StrEnum):
    NOT_FOUND = "not_found"
    FORBIDDEN = "forbidden"
    LAST_OWNER = "last_owner"
    ALREADY_MEMBER = "already_member"
    ALREADY_INVITED = "already_invited"
    INVALID = "invalid"


@dataclass(frozen=True, slots=True)
class Refusal:
    problem: Problem
    message: str
    # The form field the message belongs next to, when it is about one.
    field: str | None = None


def role_choices(actor: Role, target: Role) -> list[Role]:
    """The roles `actor` may give someone who is now `target` (empty: may not change it)."""
    if actor is Role.OWNER:
        return [Role.OWNER, Role.ADMIN, Role.MEMBER]
    if actor is Role.ADMIN and target is Role.MEMBER:
        return [Role.ADMIN, Role.MEMBER]
    return []


def may_remove(actor: Role, target: Role, *, is_self: bool) -> bool:
    if is_self:
        return True
    return actor is Role.OWNER or (actor is Role.ADMIN and target is Role.MEMBER)


def has_role(workspace_id: int, user_id: int, roles: tuple[Role, ...]) -> ColumnElement[bool]:
    """SQL: `user_id` is a member of the workspace with one of `roles`."""
    member = aliased(WorkspaceMember, name="actor")
    return exists().where(
        member.workspace_id == workspace_id,
        member.user_id == user_id,
        member.role.in_(roles),
    )


async def role_of(session: AsyncSession, workspace_id: int, user_id: int) -> Role | None:
    """The user's role in the workspace; None when they are not a member."""
    role: Role | None = await session.scalar(
        select(WorkspaceMember.role).where(
            WorkspaceMember.workspace_id == workspace_id, WorkspaceMember.user_id == user_id
        )
    )
    return role
