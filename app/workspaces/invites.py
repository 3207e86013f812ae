"""Invites to a workspace: making one, revoking it, listing the open ones, and using one.

Invite tokens are `secrets.token_urlsafe(32)`; only their SHA-256 is stored, and the link
(`{PUBLIC_BASE_URL}/invite/{token}`) is shown once, when the invite is made. The database
keeps one open invite per workspace and email (a partial unique index), so making one is an
`INSERT … ON CONFLICT DO NOTHING` whose WHERE clause also carries the rules (the inviter is
an owner or admin, the email is not a member yet); a read explains only a refusal.

Using an invite is one conditional UPDATE (still open, unexpired, for this email) plus the
membership insert, so any number of concurrent accepts of one link let exactly one in.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from sqlalchemy import ColumnElement, and_, exists, func, literal, not_, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from app.auth.users import InvalidUserError, normalize_email, validate_email
from app.db.models import Role, User, Workspace, WorkspaceInvite, WorkspaceMember
from app.workspaces.roles import Problem, Refusal, has_role, role_of

INVITE_TTL = timedelta(days=7)
INVITABLE_ROLES = (Role.ADMIN, Role.MEMBER)


# --- tokens and links ---------------------------------------------------------------------


def new_invite_token() -> str:
    return secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    """What is stored and looked up: the SHA-256 of the token, in hex."""
    return hashlib.sha256(token.encode()).hexdigest()


def invite_link(public_base_url: str, token: str) -> str:
    return f"{public_base_url.rstrip('/')}/invite/{token}"


# --- the open invites, as the Team page lists them ----------------------------------------


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
    inviter_may = has_role(workspace_id, inviter_id, (Role.OWNER, Role.ADMIN))
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
    if await role_of(session, workspace_id, inviter_id) not in (Role.OWNER, Role.ADMIN):
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
            has_role(workspace_id, actor_id, (Role.OWNER, Role.ADMIN)),
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
    if await role_of(session, workspace_id, actor_id) not in (Role.OWNER, Role.ADMIN):
        return Refusal(Problem.FORBIDDEN, "Only owners and admins can revoke invites.")
    return Refusal(Problem.NOT_FOUND, "This invite was already used or revoked.")


# --- using a link -------------------------------------------------------------------------


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


def _is_open() -> ColumnElement[bool]:
    return and_(WorkspaceInvite.accepted_at.is_(None), WorkspaceInvite.revoked_at.is_(None))
