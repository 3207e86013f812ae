"""The webhook outbox: every signed POST from Meta, stored raw before anything else happens."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import DateTime, Index, Integer, LargeBinary, String, Text, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, BigId, CreatedAt, str_enum


class WebhookStatus(StrEnum):
    RECEIVED = "received"
    ENQUEUED = "enqueued"
    PROCESSED = "processed"
    REJECTED = "rejected"


class WebhookEvent(Base):
    __tablename__ = "webhook_events"
    __table_args__ = (
        # The outbox relay scans only events not yet ingested; keep that scan tiny.
        Index(
            "ix_webhook_events_unprocessed",
            "id",
            postgresql_where=text("status IN ('received', 'enqueued')"),
        ),
        # Time-bounded reads (the overview's redelivery count today, retention's cut-off)
        # must not scan 30 days of stored bodies.
        Index("ix_webhook_events_received", "received_at"),
    )

    id: Mapped[BigId]
    received_at: Mapped[CreatedAt]
    # Exact bytes as received: the signature covers these, and re-parsing must see the same.
    body: Mapped[bytes] = mapped_column(LargeBinary)
    # Which secret verified the signature ("instagram" or "meta").
    signature_key: Mapped[str | None] = mapped_column(String(16))
    status: Mapped[WebhookStatus] = mapped_column(
        str_enum(WebhookStatus, "webhook_status"),
        default=WebhookStatus.RECEIVED,
        server_default=WebhookStatus.RECEIVED.value,
    )
    reject_reason: Mapped[str | None] = mapped_column(Text)
    item_count: Mapped[int | None] = mapped_column(Integer)
    processed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # When its ingest job was last enqueued, by the web's intake or the outbox relay (which
    # enqueues again one whose job seems lost in Redis).
    relayed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # What ingest made of it: counts per outcome, unknown accounts, ignored fields, and the
    # items it could not parse (with their JSON paths).
    details: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
