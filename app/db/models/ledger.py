"""The per-comment ledger: every comment we saw, and why it did or did not trigger a DM.

One row per `(account, comment id)` whatever path brought it (webhook or the reconciler's
poll), so a creator can always answer "did @jane get the DM, and if not, why?".
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import (
    DateTime,
    ForeignKey,
    Index,
    Integer,
    SmallInteger,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, BigId, CreatedAt, str_enum


class SeenVia(StrEnum):
    WEBHOOK = "webhook"
    POLL = "poll"


class CommentOutcome(StrEnum):
    MATCHED = "matched"
    MISSED = "missed"


class MissReason(StrEnum):
    NO_KEYWORD = "no_keyword"
    EXCLUDED_KEYWORD = "excluded_keyword"
    OWN_COMMENT = "own_comment"
    NO_ACTIVE_CAMPAIGN = "no_active_campaign"
    # The account has active campaigns, but none covers this post (or a next-post one is unbound).
    NO_CAMPAIGN_FOR_POST = "no_campaign_for_post"
    REPLY_TO_COMMENT = "reply_to_comment"
    UNKNOWN_ACCOUNT = "unknown_account"
    ACCOUNT_INACTIVE = "account_inactive"
    EMPTY_TEXT = "empty_text"
    BEFORE_ACTIVATION = "before_activation"


class Comment(Base):
    __tablename__ = "comments"
    __table_args__ = (
        UniqueConstraint("account_id", "comment_id"),
        Index(
            "ix_comments_account_created", "account_id", text("created_at DESC"), text("id DESC")
        ),
        Index(
            "ix_comments_misses",
            "account_id",
            text("created_at DESC"),
            text("id DESC"),
            postgresql_where=text("outcome = 'missed'"),
        ),
        # The misses view searches usernames and text ("did @jane's comment trigger?"):
        # trigram indexes over the misses only, like dm_logs' over deliveries.
        Index(
            "ix_comments_misses_username_trgm",
            "commenter_username",
            postgresql_using="gin",
            postgresql_ops={"commenter_username": "gin_trgm_ops"},
            postgresql_where=text("outcome = 'missed'"),
        ),
        Index(
            "ix_comments_misses_text_trgm",
            "text",
            postgresql_using="gin",
            postgresql_ops={"text": "gin_trgm_ops"},
            postgresql_where=text("outcome = 'missed'"),
        ),
    )

    id: Mapped[BigId]
    account_id: Mapped[int] = mapped_column(ForeignKey("instagram_accounts.id", ondelete="CASCADE"))
    comment_id: Mapped[str] = mapped_column(String(32))
    media_id: Mapped[str | None] = mapped_column(String(32))
    # Comments on an ad carry the ad's media id; this points at the organic post.
    original_media_id: Mapped[str | None] = mapped_column(String(32))
    parent_id: Mapped[str | None] = mapped_column(String(32))
    text: Mapped[str] = mapped_column(Text, default="", server_default="")
    commenter_id: Mapped[str | None] = mapped_column(String(32))
    commenter_username: Mapped[str | None] = mapped_column(String(64))
    # The 7-day private-reply deadline runs from here.
    commented_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    first_seen_via: Mapped[SeenVia] = mapped_column(str_enum(SeenVia, "seen_via"))
    webhook_event_id: Mapped[int | None] = mapped_column(
        ForeignKey("webhook_events.id", ondelete="SET NULL")
    )
    outcome: Mapped[CommentOutcome | None] = mapped_column(
        str_enum(CommentOutcome, "comment_outcome")
    )
    miss_reason: Mapped[MissReason | None] = mapped_column(str_enum(MissReason, "miss_reason"))
    campaign_id: Mapped[int | None] = mapped_column(
        ForeignKey("campaigns.id", ondelete="SET NULL"), index=True
    )
    matched_keyword: Mapped[str | None] = mapped_column(String(50))
    # The match decision: winner, the campaigns that also matched and lost, and why.
    decision: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    created_at: Mapped[CreatedAt]


class CommentVerdictCount(Base):
    """How many comments one campaign judged with one verdict in one UTC quarter hour.

    Kept by the database as the ledger changes (the `comments_verdict_counts_*` triggers of
    migration 0022): every statement that inserts, updates or deletes `comments` rows adds
    each row's `decision -> 'considered'` verdicts (won, lost, excluded, no_keyword) of
    campaigns that still exist, and takes away the old row's, in the same transaction. So
    a re-decided comment moves from one verdict to the other and a deleted one leaves,
    whichever statement did it. Quarter hours, because every time zone in use is a whole
    number of quarter hours off UTC: a local day is a whole number of quarters, in any zone.
    """

    __tablename__ = "comment_verdict_counts"

    campaign_id: Mapped[int] = mapped_column(
        ForeignKey("campaigns.id", ondelete="CASCADE"), primary_key=True
    )
    # The start of the quarter hour (UTC) the comment's ledger row was made in.
    quarter: Mapped[datetime] = mapped_column(DateTime(timezone=True), primary_key=True)
    verdict: Mapped[str] = mapped_column(String(16), primary_key=True)
    # The writing connection's stripe (`pg_backend_pid() % 32`, migration 0030): concurrent
    # ingest runs of one campaign add to different rows. Readers sum a key's stripes.
    stripe: Mapped[int] = mapped_column(SmallInteger, primary_key=True, server_default="0")
    comments: Mapped[int] = mapped_column(Integer, server_default="0")


class CommentVerdictTotal(Base):
    """How many comments one campaign judged with one verdict, in all: the sum of its
    `CommentVerdictCount` rows, kept by the same trigger statements (migration 0027), so the
    funnel's totals read four rows."""

    __tablename__ = "comment_verdict_totals"

    campaign_id: Mapped[int] = mapped_column(
        ForeignKey("campaigns.id", ondelete="CASCADE"), primary_key=True
    )
    verdict: Mapped[str] = mapped_column(String(16), primary_key=True)
    stripe: Mapped[int] = mapped_column(SmallInteger, primary_key=True, server_default="0")
    comments: Mapped[int] = mapped_column(Integer, server_default="0")
