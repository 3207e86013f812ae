"""Shared campaign reports: read-only links to one campaign's numbers, for a client.

Only the SHA-256 of a link's token is stored (`token_hash`, unique); the token itself is
shown once, to the owner who made the link. A revoked link keeps its row (`revoked_at`), so
the campaign page can say who shared what, and the address never works again.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import DateTime, ForeignKey, Index, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, BigId, CreatedAt


class CampaignReportLink(Base):
    __tablename__ = "campaign_report_links"
    __table_args__ = (
        UniqueConstraint("token_hash"),
        # The campaign page lists a campaign's links.
        Index("ix_campaign_report_links_campaign", "campaign_id", "created_at"),
    )

    id: Mapped[BigId]
    workspace_id: Mapped[int] = mapped_column(ForeignKey("workspaces.id", ondelete="CASCADE"))
    campaign_id: Mapped[int] = mapped_column(ForeignKey("campaigns.id", ondelete="CASCADE"))
    token_hash: Mapped[str] = mapped_column(String(64))
    created_by: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    created_at: Mapped[CreatedAt]
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
