"""Link clicks: one row per visit of a tracked link, written from the web's click spool.

`click_key` (a hash of the link and the request id) is unique, so a visit copied twice from
the spool (a retry after a crash, two processes draining one file) is one row. The person,
campaign and workspace are copied from the delivery the link belongs to, so counting needs
no join. No IP address, cookie or user agent is kept: only whether it was a person's click
or a preview fetch.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from sqlalchemy import DateTime, ForeignKey, Index, LargeBinary, SmallInteger, String
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, BigId, CreatedAt, str_enum


class LinkVisit(StrEnum):
    CLICK = "click"  # a person opened the link
    PREVIEW = "preview"  # a link-preview fetcher, a prefetch or a HEAD request


class LinkClick(Base):
    __tablename__ = "link_clicks"
    __table_args__ = (
        # Per-campaign counts and charts over a time range.
        Index("ix_link_clicks_campaign_at", "campaign_id", "clicked_at"),
        # The overview's charts across a workspace.
        Index("ix_link_clicks_ws_at", "workspace_id", "clicked_at"),
        # A log row's clicks.
        Index("ix_link_clicks_dm_log", "dm_log_id"),
    )

    id: Mapped[BigId]
    click_key: Mapped[bytes] = mapped_column(LargeBinary(32), unique=True)
    dm_log_id: Mapped[int] = mapped_column(ForeignKey("dm_logs.id", ondelete="CASCADE"))
    workspace_id: Mapped[int] = mapped_column(ForeignKey("workspaces.id", ondelete="CASCADE"))
    campaign_id: Mapped[int | None] = mapped_column(ForeignKey("campaigns.id", ondelete="SET NULL"))
    recipient_id: Mapped[str | None] = mapped_column(String(32))
    # 0-based, in the campaign's button order; `{link}` is the first button's link.
    button: Mapped[int] = mapped_column(SmallInteger)
    visit: Mapped[LinkVisit] = mapped_column(str_enum(LinkVisit, "link_visit"))
    # When the visitor asked, not when the row was copied in.
    clicked_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    recorded_at: Mapped[CreatedAt]
