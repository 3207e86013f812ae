"""Data deletion requests Meta forwarded, kept so the status page can answer for a code."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, DateTime, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, BigId, CreatedAt


class DataDeletionRequest(Base):
    __tablename__ = "data_deletion_requests"
    # Meta may repeat a request: the same user and issue time is the same request, and gets
    # the same confirmation code back.
    __table_args__ = (
        UniqueConstraint("instagram_user_id", "issued_at"),
        UniqueConstraint("confirmation_code"),
    )

    id: Mapped[BigId]
    confirmation_code: Mapped[str] = mapped_column(String(32))
    instagram_user_id: Mapped[str] = mapped_column(String(32))
    # `issued_at` of the signed request (0 when Meta sent none).
    issued_at: Mapped[int] = mapped_column(BigInteger)
    accounts_deleted: Mapped[int] = mapped_column(Integer)
    comments_anonymised: Mapped[int] = mapped_column(Integer)
    messages_anonymised: Mapped[int] = mapped_column(Integer)
    deliveries_anonymised: Mapped[int] = mapped_column(Integer)
    requested_at: Mapped[CreatedAt]
    completed_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
