"""Operational records: idempotency keys, monthly usage, and the alerts timeline."""

from __future__ import annotations

from datetime import date, datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import (
    Date,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, BigId, CreatedAt, str_enum


class IdempotencyStatus(StrEnum):
    PROCESSING = "processing"
    SUCCEEDED = "succeeded"
    FAILED_RETRYABLE = "failed_retryable"


class IdempotencyKey(Base):
    """A state-changing request's token: the first use does the work, repeats get its result."""

    __tablename__ = "idempotency_keys"
    __table_args__ = (
        UniqueConstraint("scope", "key"),
        Index("ix_idempotency_keys_expires", "expires_at"),
    )

    id: Mapped[BigId]
    key: Mapped[str] = mapped_column(String(128))
    scope: Mapped[str] = mapped_column(String(64))
    user_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    workspace_id: Mapped[int | None] = mapped_column(
        ForeignKey("workspaces.id", ondelete="CASCADE")
    )
    # Hash of what was asked; the same key with a different request is refused.
    fingerprint: Mapped[str] = mapped_column(String(64))
    status: Mapped[IdempotencyStatus] = mapped_column(
        str_enum(IdempotencyStatus, "idempotency_status"),
        default=IdempotencyStatus.PROCESSING,
        server_default=IdempotencyStatus.PROCESSING.value,
    )
    # Enough to answer a repeat the same way: e.g. {"status": 303, "location": "/campaigns/7"}.
    response: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    created_at: Mapped[CreatedAt]
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class UsageCounter(Base):
    """DMs reserved by a workspace in a calendar month (UTC)."""

    __tablename__ = "usage_counters"

    workspace_id: Mapped[int] = mapped_column(
        ForeignKey("workspaces.id", ondelete="CASCADE"), primary_key=True
    )
    month: Mapped[date] = mapped_column(Date, primary_key=True)
    dms_reserved: Mapped[int] = mapped_column(Integer, default=0, server_default="0")


class EventLevel(StrEnum):
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


class OperationalEvent(Base):
    """Something an operator or creator should know about: alerts, pauses, refused webhooks."""

    __tablename__ = "operational_events"
    __table_args__ = (
        Index("ix_operational_events_ws_created", "workspace_id", text("created_at DESC")),
        Index("ix_operational_events_created", text("created_at DESC")),
    )

    id: Mapped[BigId]
    created_at: Mapped[CreatedAt]
    workspace_id: Mapped[int | None] = mapped_column(
        ForeignKey("workspaces.id", ondelete="CASCADE")
    )
    account_id: Mapped[int | None] = mapped_column(
        ForeignKey("instagram_accounts.id", ondelete="CASCADE")
    )
    # Where it came from: "webhook", "worker", "token_refresh", "health", "web".
    source: Mapped[str] = mapped_column(String(32))
    level: Mapped[EventLevel] = mapped_column(str_enum(EventLevel, "event_level"))
    # A stable machine name, e.g. "webhook_signature_invalid", "account_paused".
    kind: Mapped[str] = mapped_column(String(64))
    message: Mapped[str] = mapped_column(Text)
    details: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    resolved_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class IdempotencyHitKind(StrEnum):
    """What was asked again and done once: the overview's three kinds."""

    WEBHOOK_DUPLICATE = "webhook_duplicate"  # a comment or message Meta sent again
    SEND_BLOCKED = "send_blocked"  # a delivery job for a leg already sent or in flight
    BUTTON_REPEAT = "button_repeat"  # a dashboard form or button submitted again


class IdempotencyHit(Base):
    """How many repeats of one kind an account (or, for buttons, a workspace) had in an hour.

    One row per hour and kind, incremented by an upsert where the repeat is absorbed, so a
    sudden rise in upstream duplicates shows on the overview. The retention job deletes rows
    older than a week.
    """

    __tablename__ = "idempotency_hits"
    __table_args__ = (
        Index(
            "uq_idempotency_hits_bucket",
            "workspace_id",
            "account_id",
            "kind",
            "hour",
            unique=True,
            postgresql_nulls_not_distinct=True,
        ),
    )

    id: Mapped[BigId]
    workspace_id: Mapped[int] = mapped_column(ForeignKey("workspaces.id", ondelete="CASCADE"))
    # None: a dashboard button, which belongs to the workspace rather than to one account.
    account_id: Mapped[int | None] = mapped_column(
        ForeignKey("instagram_accounts.id", ondelete="CASCADE")
    )
    kind: Mapped[str] = mapped_column(String(32))
    hour: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    hits: Mapped[int] = mapped_column(Integer)
