"""People and tenancy: users, workspaces and who belongs to which with what role."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    ForeignKey,
    Index,
    String,
    UniqueConstraint,
    text,
)
from sqlalchemy import false as sa_false
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, BigId, CreatedAt, str_enum


class Role(StrEnum):
    OWNER = "owner"
    ADMIN = "admin"
    MEMBER = "member"

    @property
    def can_change(self) -> bool:
        """Members see everything in their workspace; admins and owners also change it."""
        return self is not Role.MEMBER


class User(Base):
    __tablename__ = "users"
    __table_args__ = (
        UniqueConstraint("email"),
        # The code lower-cases every email it writes; the check makes a writer that forgets fail
        # loudly instead of creating a second account that differs only in case.
        CheckConstraint("email = lower(email)", name="email_lower_case"),
    )

    id: Mapped[BigId]
    # Stored lower-cased, so the unique key is case-insensitive.
    email: Mapped[str] = mapped_column(String(320))
    password_hash: Mapped[str] = mapped_column(String(255))
    created_at: Mapped[CreatedAt]
    last_login_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class Workspace(Base):
    __tablename__ = "workspaces"

    id: Mapped[BigId]
    name: Mapped[str] = mapped_column(String(100))
    # Monthly cap on DMs the workspace may send; NULL means no cap of ours (Meta's still apply).
    monthly_dm_quota: Mapped[int | None] = mapped_column(BigInteger)
    # IANA name the dashboard shows times in (app.workspaces.time_zone); stored times are UTC.
    time_zone: Mapped[str] = mapped_column(String(64), server_default="UTC")
    # The zone changed and the people kept per day of taps (`link_click_days`) are still to be
    # counted again in it, by the worker (`app.clicks.day_recount`); meanwhile the funnel
    # counts its days from the clicks themselves.
    click_days_recount_due: Mapped[bool] = mapped_column(
        Boolean, default=False, server_default=sa_false()
    )
    created_at: Mapped[CreatedAt]


class WorkspaceMember(Base):
    __tablename__ = "workspace_members"

    workspace_id: Mapped[int] = mapped_column(
        ForeignKey("workspaces.id", ondelete="CASCADE"), primary_key=True
    )
    user_id: Mapped[int] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), primary_key=True, index=True
    )
    role: Mapped[Role] = mapped_column(str_enum(Role, "role"))
    created_at: Mapped[CreatedAt]


class WorkspaceInvite(Base):
    """An invitation to join a workspace, by link. Only the SHA-256 of the link's token is
    stored; the token itself is shown once, to whoever made the invite."""

    __tablename__ = "workspace_invites"
    __table_args__ = (
        UniqueConstraint("token_hash"),
        # At most one open invite per email and workspace.
        Index(
            "uq_workspace_invites_open_email",
            "workspace_id",
            "email",
            unique=True,
            postgresql_where=text("accepted_at IS NULL AND revoked_at IS NULL"),
        ),
        CheckConstraint("email = lower(email)", name="email_lower_case"),
        CheckConstraint("role <> 'owner'", name="not_owner"),
    )

    id: Mapped[BigId]
    workspace_id: Mapped[int] = mapped_column(ForeignKey("workspaces.id", ondelete="CASCADE"))
    email: Mapped[str] = mapped_column(String(320))
    role: Mapped[Role] = mapped_column(str_enum(Role, "role"))
    token_hash: Mapped[str] = mapped_column(String(64))
    invited_by: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    created_at: Mapped[CreatedAt]
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    accepted_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    accepted_by: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
