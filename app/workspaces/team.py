"""A workspace's team: invites, roles, removing people, leaving, and which workspaces a user has.

The rules (the page, the CLI and the tests all go through these functions):

- owners and admins invite, as admin or member (nobody is invited as owner);
- only an owner makes someone owner, changes an owner's or an admin's role, or removes an
  admin or an owner; admins change and remove members only (and may promote a member to admin);
- a workspace always keeps an owner: nobody removes or demotes the last one, and the last
  owner cannot leave;
- anyone else may leave a workspace themselves.

Every change is one conditional SQL statement that carries its own rule in its WHERE clause:
the row count decides the answer, and only when it is zero does a read explain why. So a rule
cannot be checked against a stale read. The statements that could take away an owner
(demote, remove, leave) first lock the workspace row (`FOR NO KEY UPDATE`, which does not
block inserts of rows referencing the workspace): two owners demoting each other at the same
moment then run one after the other, and the second statement, under a fresh snapshot, sees
that it would leave no owner.

Invite tokens are `secrets.token_urlsafe(32)`; only their SHA-256 is stored, and the link
(`{PUBLIC_BASE_URL}/invite/{token}`) is shown once, when the invite is made.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from sqlalchemy import (
    ColumnElement,
    and_,
    delete,
    exists,
    false,
    func,
    literal,
    not_,
    or_,
    select,
    true,
    update,
)
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from app.auth.users import InvalidUserError, normalize_email, validate_email
from app.db.models import Role, User, Workspace, WorkspaceInvite, WorkspaceMember

INVITE_TTL = timedelta(days=7)
INVITABLE_ROLES = (Role.ADMIN, Role.MEMBER)
_RANK = {Role.OWNER: 0, Role.ADMIN: 1, Role.MEMBER: 2}


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


# --- tokens and links ---------------------------------------------------------------------


def new_invite_token() -> str:
    return secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    """What is stored and looked up: the SHA-256 of the token, in hex."""
    return hashlib.sha256(token.encode()).hexdigest()


def invite_link(public_base_url: str, token: str) -> str:
    return f"{public_base_url.rstrip('/')}/invite/{token}"


# --- the rules, for pages that draw buttons and for explaining a refusal ------------------


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


# --- reading the team ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MemberRow:
    user_id: int
    email: str
    role: Role
    joined_at: datetime


@dataclass(frozen=True, slots=True)
class InviteRow:
    id: int
    email: str
    role: Role
    created_at: datetime
    expires_at: datetime
    invited_by: str | None

    def expired(self) -> bool:
        return self.expires_at <= datetime.now(UTC)


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


async def list_open_invites(session: AsyncSession, workspace_id: int) -> list[InviteRow]:
    """Invites not accepted and not revoked, expired ones included (they can be revoked)."""
    inviter = aliased(User)
    rows = (
        await session.execute(
            select(
                WorkspaceInvite.id,
                WorkspaceInvite.email,
                WorkspaceInvite.role,
                WorkspaceInvite.created_at,
                WorkspaceInvite.expires_at,
                inviter.email,
            )
            .outerjoin(inviter, inviter.id == WorkspaceInvite.invited_by)
            .where(WorkspaceInvite.workspace_id == workspace_id, _is_open())
            .order_by(WorkspaceInvite.created_at, WorkspaceInvite.id)
        )
    ).all()
    return [
        InviteRow(id=r[0], email=r[1], role=r[2], created_at=r[3], expires_at=r[4], invited_by=r[5])
        for r in rows
    ]


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


# --- inviting -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class InviteCreated:
    invite_id: int
    token: str
    email: str
    role: Role
    expires_at: datetime


def parse_invite_role(raw: str) -> Role | None:
    try:
        role = Role(raw.strip().lower())
    except ValueError:
        return None
    return role if role in INVITABLE_ROLES else None


def check_invite_input(email: str, role_raw: str) -> tuple[str, Role | None, dict[str, str]]:
    """Normalise the form's email and role; the errors, by field, for what is wrong."""
    email = normalize_email(email)
    errors: dict[str, str] = {}
    try:
        validate_email(email)
    except InvalidUserError as exc:
        errors["email"] = str(exc)
    role = parse_invite_role(role_raw)
    if role is None:
        errors["role"] = "Choose admin or member."
    return email, role, errors


async def create_invite(
    session: AsyncSession, *, workspace_id: int, inviter_id: int, email: str, role: Role
) -> InviteCreated | Refusal:
    """Make an open invite for `email`, in the caller's transaction; the token is returned
    once and only its hash is stored."""
    email, parsed, errors = check_invite_input(email, role.value)
    if errors or parsed is None:
        field, message = next(iter(errors.items()))
        return Refusal(Problem.INVALID, message, field)
    token = new_invite_token()
    inviter_may = _has_role(workspace_id, inviter_id, (Role.OWNER, Role.ADMIN))
    # An expired invite still holds the "one open invite per email" slot: close it first.
    await session.execute(
        update(WorkspaceInvite)
        .where(
            WorkspaceInvite.workspace_id == workspace_id,
            WorkspaceInvite.email == email,
            _is_open(),
            WorkspaceInvite.expires_at <= func.now(),
            inviter_may,
        )
        .values(revoked_at=func.now())
    )
    is_member = (
        exists()
        .where(
            WorkspaceMember.workspace_id == workspace_id,
            WorkspaceMember.user_id == User.id,
            User.email == email,
        )
        .correlate_except(WorkspaceMember, User)
    )
    rows = select(
        literal(workspace_id),
        literal(email),
        literal(parsed.value),
        literal(hash_token(token)),
        literal(inviter_id),
        func.now() + INVITE_TTL,
    ).where(inviter_may, not_(is_member))
    created = (
        await session.execute(
            insert(WorkspaceInvite)
            .from_select(
                ["workspace_id", "email", "role", "token_hash", "invited_by", "expires_at"], rows
            )
            .on_conflict_do_nothing(
                index_elements=[WorkspaceInvite.workspace_id, WorkspaceInvite.email],
                index_where=_is_open(),
            )
            .returning(WorkspaceInvite.id, WorkspaceInvite.expires_at)
        )
    ).one_or_none()
    if created is not None:
        return InviteCreated(
            invite_id=created[0], token=token, email=email, role=parsed, expires_at=created[1]
        )
    # Nothing was inserted: say why.
    if await _role_of(session, workspace_id, inviter_id) not in (Role.OWNER, Role.ADMIN):
        return Refusal(Problem.FORBIDDEN, "Only owners and admins can invite people.")
    if await session.scalar(select(is_member)):
        return Refusal(
            Problem.ALREADY_MEMBER, f"{email} is already a member of this workspace.", "email"
        )
    return Refusal(
        Problem.ALREADY_INVITED,
        f"{email} already has an open invite. Revoke it below to make a new link.",
        "email",
    )


async def revoke_invite(
    session: AsyncSession, *, workspace_id: int, actor_id: int, invite_id: int
) -> Refusal | None:
    """Close an open invite of this workspace; its link stops working at once."""
    revoked = await session.scalar(
        update(WorkspaceInvite)
        .where(
            WorkspaceInvite.id == invite_id,
            WorkspaceInvite.workspace_id == workspace_id,
            _is_open(),
            _has_role(workspace_id, actor_id, (Role.OWNER, Role.ADMIN)),
        )
        .values(revoked_at=func.now())
        .returning(WorkspaceInvite.id)
    )
    if revoked is not None:
        return None
    exists_here = await session.scalar(
        select(WorkspaceInvite.id).where(
            WorkspaceInvite.id == invite_id, WorkspaceInvite.workspace_id == workspace_id
        )
    )
    if exists_here is None:
        return Refusal(Problem.NOT_FOUND, "No such invite in this workspace.")
    if await _role_of(session, workspace_id, actor_id) not in (Role.OWNER, Role.ADMIN):
        return Refusal(Problem.FORBIDDEN, "Only owners and admins can revoke invites.")
    return Refusal(Problem.NOT_FOUND, "This invite was already used or revoked.")


# --- roles, removing, leaving -------------------------------------------------------------


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


# --- accepting ----------------------------------------------------------------------------


class InviteState(StrEnum):
    OPEN = "open"
    EXPIRED = "expired"
    REVOKED = "revoked"
    USED = "used"


@dataclass(frozen=True, slots=True)
class InviteView:
    """An invite as its link shows it to the person invited."""

    id: int
    workspace_id: int
    workspace_name: str
    email: str
    role: Role
    invited_by: str | None
    expires_at: datetime
    state: InviteState
    accepted_by: int | None


async def find_invite(session: AsyncSession, token: str) -> InviteView | None:
    inviter = aliased(User)
    row = (
        await session.execute(
            select(
                WorkspaceInvite.id,
                WorkspaceInvite.workspace_id,
                Workspace.name,
                WorkspaceInvite.email,
                WorkspaceInvite.role,
                inviter.email,
                WorkspaceInvite.expires_at,
                WorkspaceInvite.accepted_at,
                WorkspaceInvite.revoked_at,
                WorkspaceInvite.expires_at <= func.now(),
                WorkspaceInvite.accepted_by,
            )
            .join(Workspace, Workspace.id == WorkspaceInvite.workspace_id)
            .outerjoin(inviter, inviter.id == WorkspaceInvite.invited_by)
            .where(WorkspaceInvite.token_hash == hash_token(token))
        )
    ).one_or_none()
    if row is None:
        return None
    if row[7] is not None:
        state = InviteState.USED
    elif row[8] is not None:
        state = InviteState.REVOKED
    elif row[9]:
        state = InviteState.EXPIRED
    else:
        state = InviteState.OPEN
    return InviteView(
        id=row[0],
        workspace_id=row[1],
        workspace_name=row[2],
        email=row[3],
        role=row[4],
        invited_by=row[5],
        expires_at=row[6],
        state=state,
        accepted_by=row[10],
    )


@dataclass(frozen=True, slots=True)
class Accepted:
    workspace_id: int
    role: Role


async def accept_invite(
    session: AsyncSession, *, token: str, user_id: int, email: str
) -> Accepted | InviteView | None:
    """Use the invite for `user_id` (whose email must be the invited one), in the caller's
    transaction. Exactly one of any number of concurrent accepts gets `Accepted`; the others
    get the invite as it now is (used), and an unknown token gets None."""
    used = (
        await session.execute(
            update(WorkspaceInvite)
            .where(
                WorkspaceInvite.token_hash == hash_token(token),
                _is_open(),
                WorkspaceInvite.expires_at > func.now(),
                WorkspaceInvite.email == normalize_email(email),
            )
            .values(accepted_at=func.now(), accepted_by=user_id)
            .returning(WorkspaceInvite.workspace_id, WorkspaceInvite.role)
        )
    ).one_or_none()
    if used is None:
        return await find_invite(session, token)
    workspace_id, role = used
    await session.execute(
        insert(WorkspaceMember)
        .values(workspace_id=workspace_id, user_id=user_id, role=role)
        .on_conflict_do_nothing(
            index_elements=[WorkspaceMember.workspace_id, WorkspaceMember.user_id]
        )
    )
    return Accepted(workspace_id=workspace_id, role=role)


async def is_member(session: AsyncSession, workspace_id: int, user_id: int) -> bool:
    return await _role_of(session, workspace_id, user_id) is not None


# --- helpers ------------------------------------------------------------------------------


def _is_open() -> ColumnElement[bool]:
    return and_(WorkspaceInvite.accepted_at.is_(None), WorkspaceInvite.revoked_at.is_(None))


def _has_role(workspace_id: int, user_id: int, roles: tuple[Role, ...]) -> ColumnElement[bool]:
    member = aliased(WorkspaceMember, name="actor")
    return exists().where(
        member.workspace_id == workspace_id,
        member.user_id == user_id,
        member.role.in_(roles),
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


async def _role_of(session: AsyncSession, workspace_id: int, user_id: int) -> Role | None:
    role: Role | None = await session.scalar(
        select(WorkspaceMember.role).where(
            WorkspaceMember.workspace_id == workspace_id, WorkspaceMember.user_id == user_id
        )
    )
    return role


async def _explain(
    session: AsyncSession,
    workspace_id: int,
    actor_id: int,
    target_id: int,
    *,
    new_role: Role | None,
) -> Refusal:
    """Why a role change (`new_role`) or a removal (None) changed nothing."""
    target = await _role_of(session, workspace_id, target_id)
    if target is None:
        return Refusal(Problem.NOT_FOUND, "No such member in this workspace.")
    actor = await _role_of(session, workspace_id, actor_id)
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
