"""Delivery counts kept as `dm_logs` changes, so reports sum a few rows instead of counting
deliveries, and the funnel's people who tapped the opening DM or got the link, once each.

A statement-level trigger on `dm_logs` keeps them (migrations 0023, 0026, 0029 and 0037;
`docs/architecture.md`, "Kept delivery counts"): whichever module inserts, updates or deletes
deliveries, their counts move in the same statement, so no write path can forget them.

`DeliveryCount` is one row per (workspace, campaign, account, 15-minute UTC slice, follow-on or
not) with a column per private-reply state (PENDING and IN_FLIGHT share one) and a few more
the pages need; `DeliveryTotal` the same without the slice, `DeliveryWorkspaceQuarter` the
states per workspace and slice. Fifteen minutes, because every time zone's hours and days
start on a quarter hour (India's at :30 UTC, Nepal's at :15): an hour or a day in any zone is
a whole number of slices.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    BigInteger,
    Boolean,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    SmallInteger,
    String,
)
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base


def _count() -> Mapped[int]:
    return mapped_column(Integer, server_default="0")


# Rows of one key, so that concurrent statements add to different rows (each the stripe of
# its connection, `pg_backend_pid() % 32`): a reader sums them like any other rows.
def _stripe() -> Mapped[int]:
    return mapped_column(SmallInteger, server_default="0")


class _StateCounts:
    """Deliveries by their private reply's state now (`app.delivery_log.kept_counts`)."""

    # PENDING or IN_FLIGHT: waiting to be sent or being sent. One column, so that a claim
    # (PENDING to IN_FLIGHT) moves no count and runs no counting statement (migration 0037).
    unsettled: Mapped[int] = _count()
    sent: Mapped[int] = _count()
    failed: Mapped[int] = _count()
    unconfirmed: Mapped[int] = _count()
    skipped_dedup: Mapped[int] = _count()
    skipped_rate_limit: Mapped[int] = _count()
    skipped_quota: Mapped[int] = _count()
    skipped_window_expired: Mapped[int] = _count()
    skipped_account_paused: Mapped[int] = _count()
    skipped_campaign_inactive: Mapped[int] = _count()


class _Counts(_StateCounts):
    # Deliveries a DM, story reply or story mention fired (not a comment).
    dm_triggers: Mapped[int] = _count()
    # Link DMs (`reveal`) SENT.
    link_sent: Mapped[int] = _count()
    # Deliveries proven delivered after an unknown answer, and of those, by Meta's 2534025.
    proven: Mapped[int] = _count()
    proven_by_meta: Mapped[int] = _count()
    # People whose first tap on the opening DM / first link DM was one of these deliveries.
    tapped_people: Mapped[int] = _count()
    passed_people: Mapped[int] = _count()


class DeliveryCount(_Counts, Base):
    """Deliveries created in one 15-minute slice, by their state now (see the module)."""

    __tablename__ = "delivery_counts"
    __table_args__ = (
        # The key; its order serves a campaign's totals and its time ranges alike.
        Index(
            "uq_delivery_counts_key",
            "workspace_id",
            "campaign_id",
            "quarter",
            "account_id",
            "follow_on",
            "stripe",
            unique=True,
            postgresql_nulls_not_distinct=True,
        ),
        # A workspace's deliveries over time: the overview's today.
        Index("ix_delivery_counts_ws_quarter", "workspace_id", "quarter"),
    )
    # No primary key in the table (a campaign may be None); the ORM still needs one.
    __mapper_args__ = {  # noqa: RUF012 - SQLAlchemy reads it as a plain dict
        "primary_key": [
            "workspace_id",
            "campaign_id",
            "quarter",
            "account_id",
            "follow_on",
            "stripe",
        ]
    }

    workspace_id: Mapped[int] = mapped_column(ForeignKey("workspaces.id", ondelete="CASCADE"))
    # None: deliveries whose campaign was deleted (the workspace's charts still count them).
    campaign_id: Mapped[int | None] = mapped_column(ForeignKey("campaigns.id", ondelete="CASCADE"))
    quarter: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    account_id: Mapped[int] = mapped_column(BigInteger)
    # Postbacks (a tap on a DM's button) and follow-ups: deliveries answering a delivery, not
    # a comment or DM that matched.
    follow_on: Mapped[bool] = mapped_column(Boolean)
    stripe: Mapped[int] = _stripe()


class DeliveryTotal(_Counts, Base):
    """`DeliveryCount` summed over time: a campaign's totals in a few rows (its funnel, the
    summary CSV, its link DMs sent)."""

    __tablename__ = "delivery_totals"
    __table_args__ = (
        Index(
            "uq_delivery_totals_key",
            "workspace_id",
            "campaign_id",
            "account_id",
            "follow_on",
            "stripe",
            unique=True,
            postgresql_nulls_not_distinct=True,
        ),
    )
    __mapper_args__ = {  # noqa: RUF012 - SQLAlchemy reads it as a plain dict
        "primary_key": ["workspace_id", "campaign_id", "account_id", "follow_on", "stripe"]
    }

    workspace_id: Mapped[int] = mapped_column(ForeignKey("workspaces.id", ondelete="CASCADE"))
    campaign_id: Mapped[int | None] = mapped_column(ForeignKey("campaigns.id", ondelete="CASCADE"))
    account_id: Mapped[int] = mapped_column(BigInteger)
    follow_on: Mapped[bool] = mapped_column(Boolean)
    stripe: Mapped[int] = _stripe()


class DeliveryWorkspaceQuarter(_StateCounts, Base):
    """`DeliveryCount`'s states summed over the workspace's campaigns and accounts: the
    workspace's charts read 96 rows a day, however many campaigns it runs."""

    __tablename__ = "delivery_workspace_quarters"

    workspace_id: Mapped[int] = mapped_column(
        ForeignKey("workspaces.id", ondelete="CASCADE"), primary_key=True
    )
    quarter: Mapped[datetime] = mapped_column(DateTime(timezone=True), primary_key=True)
    stripe: Mapped[int] = mapped_column(SmallInteger, primary_key=True, server_default="0")


class FunnelPerson(Base):
    """A person who reached a funnel step of a campaign: once, by the key.

    `step` is `tapped` (tapped the opening DM's button) or `passed` (a link DM SENT to them:
    past the follow gate when it is on). `first_log_id` is the delivery that first counted
    them; its slice of `delivery_counts` holds them in `tapped_people` / `passed_people`.
    """

    __tablename__ = "funnel_people"

    campaign_id: Mapped[int] = mapped_column(
        ForeignKey("campaigns.id", ondelete="CASCADE"), primary_key=True
    )
    step: Mapped[str] = mapped_column(String(8), primary_key=True)
    recipient_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    first_log_id: Mapped[int] = mapped_column(BigInteger)
    first_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
