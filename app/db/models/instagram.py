"""Connected Instagram professional accounts and their encrypted tokens."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from sqlalchemy import ARRAY, DateTime, ForeignKey, LargeBinary, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, BigId, CreatedAt, UpdatedAt, str_enum


class AccountStatus(StrEnum):
    ACTIVE = "active"
    NEEDS_REAUTH = "needs_reauth"
    PAUSED = "paused"
    DISCONNECTED = "disconnected"


class InstagramAccount(Base):
    __tablename__ = "instagram_accounts"
    # `ig_user_id` is the professional account id (`/me.user_id`, the webhook `entry.id`), never
    # the app-scoped `/me.id`: storing the wrong one means no webhook ever matches.
    __table_args__ = (UniqueConstraint("ig_user_id"),)

    id: Mapped[BigId]
    workspace_id: Mapped[int] = mapped_column(
        ForeignKey("workspaces.id", ondelete="CASCADE"), index=True
    )
    ig_user_id: Mapped[str] = mapped_column(String(32))
    app_scoped_id: Mapped[str | None] = mapped_column(String(32))
    username: Mapped[str] = mapped_column(String(64))
    name: Mapped[str | None] = mapped_column(String(255))
    account_type: Mapped[str | None] = mapped_column(String(32))
    token_ciphertext: Mapped[bytes | None] = mapped_column(LargeBinary)
    token_key_id: Mapped[str | None] = mapped_column(String(16))
    # Meta refreshes a long-lived token only once it is 24 h old, so remember when it was issued.
    token_issued_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    token_expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    webhook_subscribed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    webhook_fields: Mapped[list[str] | None] = mapped_column(ARRAY(String(64)))
    # The permissions Instagram reported granting at the last connect (NULL: not reported).
    granted_permissions: Mapped[list[str] | None] = mapped_column(ARRAY(String(64)))
    status: Mapped[AccountStatus] = mapped_column(
        str_enum(AccountStatus, "account_status"),
        default=AccountStatus.ACTIVE,
        server_default=AccountStatus.ACTIVE.value,
    )
    paused_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # Set while the hourly private-reply budget is full and comments wait for it: the account's
    # pacer then hands out every private reply (`app.delivery.send.pacer`).
    pr_backlog_since: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # Likewise for its public replies' own budget (`app.delivery.send.public_pacer`).
    pub_backlog_since: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    status_reason: Mapped[str | None] = mapped_column(Text)
    last_reconciled_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    connected_at: Mapped[CreatedAt]
    updated_at: Mapped[UpdatedAt]
