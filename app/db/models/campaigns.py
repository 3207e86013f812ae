"""Campaigns: which comments (or DMs) trigger which messages, on which account."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import ARRAY, Boolean, DateTime, ForeignKey, Index, Integer, String, Text, text
from sqlalchemy import false as sa_false
from sqlalchemy import true as sa_true
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, BigId, CreatedAt, UpdatedAt, str_enum


class CampaignStatus(StrEnum):
    DRAFT = "draft"
    ACTIVE = "active"
    PAUSED = "paused"
    ARCHIVED = "archived"


class CampaignScope(StrEnum):
    POST = "post"
    ANY_POST = "any_post"
    NEXT_POST = "next_post"


class CampaignTrigger(StrEnum):
    """What a campaign answers: comments on posts, replies to stories, or story mentions."""

    COMMENTS = "comments"
    STORY_REPLIES = "story_replies"
    STORY_MENTIONS = "story_mentions"


class MatchMode(StrEnum):
    WHOLE_WORD = "whole_word"
    CONTAINS = "contains"
    EXACT = "exact"
    ANY_COMMENT = "any_comment"


class Campaign(Base):
    __tablename__ = "campaigns"
    __table_args__ = (
        # Matching loads the active campaigns of one account for every comment batch.
        Index(
            "ix_campaigns_account_active", "account_id", postgresql_where=text("status = 'active'")
        ),
    )

    id: Mapped[BigId]
    workspace_id: Mapped[int] = mapped_column(
        ForeignKey("workspaces.id", ondelete="CASCADE"), index=True
    )
    account_id: Mapped[int] = mapped_column(
        ForeignKey("instagram_accounts.id", ondelete="CASCADE"), index=True
    )
    name: Mapped[str] = mapped_column(String(100))
    status: Mapped[CampaignStatus] = mapped_column(
        str_enum(CampaignStatus, "campaign_status"),
        default=CampaignStatus.DRAFT,
        server_default=CampaignStatus.DRAFT.value,
    )
    trigger: Mapped[CampaignTrigger] = mapped_column(
        str_enum(CampaignTrigger, "campaign_trigger"),
        default=CampaignTrigger.COMMENTS,
        server_default=CampaignTrigger.COMMENTS.value,
    )
    # Comment campaigns only (a story campaign keeps `any_post`, which no comment path reads).
    scope: Mapped[CampaignScope] = mapped_column(str_enum(CampaignScope, "campaign_scope"))
    media_id: Mapped[str | None] = mapped_column(String(32), index=True)
    media_caption: Mapped[str | None] = mapped_column(Text)
    # Story replies: the one story answered (NULL: every story) and when it stops being live.
    story_id: Mapped[str | None] = mapped_column(String(32))
    story_expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # next_post: the campaign binds to the first reel/post published after this instant.
    armed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # The reconciler never reaches back before the campaign last became active.
    activated_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    keywords: Mapped[list[str]] = mapped_column(
        ARRAY(String(50)), default=list, server_default="{}"
    )
    excluded_keywords: Mapped[list[str]] = mapped_column(
        ARRAY(String(50)), default=list, server_default="{}"
    )
    match_mode: Mapped[MatchMode] = mapped_column(
        str_enum(MatchMode, "match_mode"),
        default=MatchMode.WHOLE_WORD,
        server_default=MatchMode.WHOLE_WORD.value,
    )
    dm_text: Mapped[str] = mapped_column(Text, default="", server_default="")
    # Up to 3 link buttons: [{"title": "...", "url": "https://..."}], in display order.
    buttons: Mapped[list[dict[str, Any]]] = mapped_column(JSONB, default=list, server_default="[]")
    opening_dm_enabled: Mapped[bool] = mapped_column(
        Boolean, default=False, server_default=sa_false()
    )
    opening_dm_text: Mapped[str | None] = mapped_column(Text)
    opening_dm_button_title: Mapped[str | None] = mapped_column(String(20))
    follow_gate_enabled: Mapped[bool] = mapped_column(
        Boolean, default=False, server_default=sa_false()
    )
    follow_prompt_text: Mapped[str | None] = mapped_column(Text)
    follow_prompt_button_title: Mapped[str | None] = mapped_column(String(20))
    public_reply_enabled: Mapped[bool] = mapped_column(
        Boolean, default=False, server_default=sa_false()
    )
    public_replies: Mapped[list[str]] = mapped_column(
        ARRAY(Text), default=list, server_default="{}"
    )
    # The public reply ("Sent you a DM!") is posted only once the DM is SENT; off for a reply
    # that does not mention the DM, posted whatever became of it.
    public_reply_after_dm: Mapped[bool] = mapped_column(
        Boolean, default=True, server_default=sa_true()
    )
    # While the account's private replies wait for its hourly limit (a surge), settle the
    # public reply as skipped instead of posting it.
    public_reply_skip_in_backlog: Mapped[bool] = mapped_column(
        Boolean, default=False, server_default=sa_false()
    )
    follow_up_enabled: Mapped[bool] = mapped_column(
        Boolean, default=False, server_default=sa_false()
    )
    follow_up_text: Mapped[str | None] = mapped_column(Text)
    follow_up_delay_minutes: Mapped[int] = mapped_column(Integer, default=60, server_default="60")
    # An image sent just before the DM, and a card (generic template) sent instead of it;
    # both only in a DM after a tap or a DM (`app.campaigns.media_message`).
    dm_image_url: Mapped[str | None] = mapped_column(Text)
    card_enabled: Mapped[bool] = mapped_column(Boolean, default=False, server_default=sa_false())
    card_title: Mapped[str | None] = mapped_column(Text)
    card_subtitle: Mapped[str | None] = mapped_column(Text)
    dm_trigger_enabled: Mapped[bool] = mapped_column(
        Boolean, default=False, server_default=sa_false()
    )
    once_per_person: Mapped[bool] = mapped_column(Boolean, default=True, server_default=sa_true())
    # Tracked links gain utm_source=instagram&utm_medium=dm&utm_campaign=<name>.
    utm_enabled: Mapped[bool] = mapped_column(Boolean, default=False, server_default=sa_false())
    priority: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # Bumped by every edit; a delivery records the version it was rendered from.
    version: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    created_by_user_id: Mapped[int | None] = mapped_column(
        ForeignKey("users.id", ondelete="SET NULL")
    )
    created_at: Mapped[CreatedAt]
    updated_at: Mapped[UpdatedAt]
