"""Link clicks: one row per visit of a tracked link, written from the web's click spool, and
the counts the dashboard reads instead of counting those rows.

`click_key` (a hash of the link and the request id) is unique, so a visit copied twice from
the spool (a retry after a crash, two processes draining one file) is one row. The person,
campaign and workspace are copied from the delivery the link belongs to, so counting needs
no join. No IP address, cookie or user agent is kept: only whether it was a person's click
or a preview fetch.

The counts (`LinkClickHour`, one row per campaign, hour and button) and the people who tapped
(`LinkClickPerson` per campaign, `LinkClickButtonPerson` per button, each unique by its key)
are kept by the same statement that inserts the clicks (`app.clicks.rollup`): a campaign
with 400,000 taps is summed from a few thousand rows, and "unique per person" is the
database's unique key, not a `count(DISTINCT …)` over every tap.
"""

from __future__ import annotations

from datetime import date, datetime
from enum import StrEnum

from sqlalchemy import (
    Date,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    SmallInteger,
    String,
)
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, BigId, CreatedAt, str_enum


class LinkVisit(StrEnum):
    CLICK = "click"  # a person opened the link
    PREVIEW = "preview"  # a link-preview fetcher, a prefetch or a HEAD request


class LinkClick(Base):
    __tablename__ = "link_clicks"
    __table_args__ = (
        # A time range of one campaign's raw clicks.
        Index("ix_link_clicks_campaign_at", "campaign_id", "clicked_at"),
        # A time range of a workspace's raw clicks.
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


class LinkClickHour(Base):
    """One campaign's visits of one button in one hour (UTC), counted as they are copied in."""

    __tablename__ = "link_click_hours"
    __table_args__ = (
        # A workspace's clicks over time (the overview's chart).
        Index("ix_link_click_hours_ws_hour", "workspace_id", "hour"),
    )

    # The key's order serves a campaign's totals and its charts over a time range alike.
    campaign_id: Mapped[int] = mapped_column(
        ForeignKey("campaigns.id", ondelete="CASCADE"), primary_key=True
    )
    hour: Mapped[datetime] = mapped_column(DateTime(timezone=True), primary_key=True)
    button: Mapped[int] = mapped_column(SmallInteger, primary_key=True)
    workspace_id: Mapped[int] = mapped_column(ForeignKey("workspaces.id", ondelete="CASCADE"))
    taps: Mapped[int] = mapped_column(Integer, server_default="0")
    previews: Mapped[int] = mapped_column(Integer, server_default="0")
    # People whose first tap of any of the campaign's links was this one (so the campaign's
    # people are the sum of this column), and whose first tap of this button was (per button).
    people: Mapped[int] = mapped_column(Integer, server_default="0")
    button_people: Mapped[int] = mapped_column(Integer, server_default="0")


class LinkClickQuarter(Base):
    """One campaign's taps of one button in one 15-minute UTC slice: the charts' taps, whose
    local hours and days are whole slices in every zone (half-hour ones too)."""

    __tablename__ = "link_click_quarters"
    __table_args__ = (
        # A workspace's taps over time (the overview's chart).
        Index("ix_link_click_quarters_ws_quarter", "workspace_id", "quarter"),
    )

    campaign_id: Mapped[int] = mapped_column(
        ForeignKey("campaigns.id", ondelete="CASCADE"), primary_key=True
    )
    quarter: Mapped[datetime] = mapped_column(DateTime(timezone=True), primary_key=True)
    button: Mapped[int] = mapped_column(SmallInteger, primary_key=True)
    workspace_id: Mapped[int] = mapped_column(ForeignKey("workspaces.id", ondelete="CASCADE"))
    taps: Mapped[int] = mapped_column(Integer, server_default="0")


class LinkClickPerson(Base):
    """A person who tapped one of a campaign's links: once, by the key."""

    __tablename__ = "link_click_people"

    campaign_id: Mapped[int] = mapped_column(
        ForeignKey("campaigns.id", ondelete="CASCADE"), primary_key=True
    )
    recipient_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    button: Mapped[int] = mapped_column(SmallInteger)  # of the first tap
    first_clicked_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class LinkClickButtonPerson(Base):
    """A person who tapped one button of a campaign: once per button, by the key."""

    __tablename__ = "link_click_button_people"

    campaign_id: Mapped[int] = mapped_column(
        ForeignKey("campaigns.id", ondelete="CASCADE"), primary_key=True
    )
    button: Mapped[int] = mapped_column(SmallInteger, primary_key=True)
    recipient_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    first_clicked_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class LinkClickDayPerson(Base):
    """A person who tapped one of a campaign's links on one day of the workspace's time zone:
    once per day, by the key."""

    __tablename__ = "link_click_day_people"

    campaign_id: Mapped[int] = mapped_column(
        ForeignKey("campaigns.id", ondelete="CASCADE"), primary_key=True
    )
    day: Mapped[date] = mapped_column(Date, primary_key=True)
    recipient_id: Mapped[str] = mapped_column(String(32), primary_key=True)


class LinkClickDay(Base):
    """How many people tapped one of a campaign's links on one day of the workspace's zone.

    Kept by the click copier's statement (`app.clicks.rollup`) with `LinkClickDayPerson`, in
    the workspace's zone at the time; when the zone changes, the worker counts the last 31
    days again in the new zone (`app.clicks.day_recount`; older days, which no page shows,
    keep their rows until retention forgets them, `app.maintenance.retention`).
    """

    __tablename__ = "link_click_days"
    __table_args__ = (Index("ix_link_click_days_workspace", "workspace_id"),)

    campaign_id: Mapped[int] = mapped_column(
        ForeignKey("campaigns.id", ondelete="CASCADE"), primary_key=True
    )
    day: Mapped[date] = mapped_column(Date, primary_key=True)
    workspace_id: Mapped[int] = mapped_column(ForeignKey("workspaces.id", ondelete="CASCADE"))
    people: Mapped[int] = mapped_column(Integer, server_default="0")
