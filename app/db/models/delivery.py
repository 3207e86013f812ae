"""Deliveries: one `dm_logs` row per trigger with a state per leg, and the evidence behind it.

A comment gets at most one private reply from Instagram, whatever the campaign, so `dm_logs` is
unique on `(account_id, trigger_id)`: the comment id for comments, `dm:<mid>` for a DM keyword
trigger, `story:<mid>` for a story reply, `mention:<mid>` for a story mention, `postback:<key>`
for a button tap, `followup:<source log id>` for a follow-up.
The private-reply/DM leg (`pr_*`) and the public-reply leg (`pub_*`) each carry their own
state, attempt counter and claim, so one failing never blocks the other. `message_kind` says
what the leg sends (the link, an opening DM, a follow prompt, a follow-up): the trigger decides
who gets a message, the campaign's two-step settings decide which one.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import (
    BigInteger,
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

from app.db.base import Base, BigId, CreatedAt, UpdatedAt, str_enum


class LegState(StrEnum):
    PENDING = "PENDING"
    IN_FLIGHT = "IN_FLIGHT"
    SENT = "SENT"
    FAILED = "FAILED"
    UNCONFIRMED = "UNCONFIRMED"
    SKIPPED_DEDUP = "SKIPPED_DEDUP"
    SKIPPED_RATE_LIMIT = "SKIPPED_RATE_LIMIT"
    SKIPPED_QUOTA = "SKIPPED_QUOTA"
    SKIPPED_WINDOW_EXPIRED = "SKIPPED_WINDOW_EXPIRED"
    SKIPPED_ACCOUNT_PAUSED = "SKIPPED_ACCOUNT_PAUSED"
    SKIPPED_CAMPAIGN_INACTIVE = "SKIPPED_CAMPAIGN_INACTIVE"

    @property
    def is_skip(self) -> bool:
        return self.value.startswith("SKIPPED_")

    @property
    def is_final(self) -> bool:
        return self not in {LegState.PENDING, LegState.IN_FLIGHT}


class TriggerKind(StrEnum):
    COMMENT = "comment"
    MESSAGE = "message"
    POSTBACK = "postback"
    FOLLOW_UP = "follow_up"
    STORY_REPLY = "story_reply"  # a reply to one of the account's stories (a DM by IGSID)
    STORY_MENTION = "story_mention"  # the person mentioned the account in their own story


class MessageKind(StrEnum):
    """What a log row's DM says (see `app.delivery.content.compose`)."""

    REVEAL = "reveal"  # the campaign's DM with its links
    OPENING_DM = "opening_dm"  # "tap to get it": a postback button that asks for the reveal
    FOLLOW_PROMPT = "follow_prompt"  # "follow me, then tap": the follow gate's postback button
    FOLLOW_UP = "follow_up"  # the later thank-you after a reveal that opened the window


class PersonClaim(StrEnum):
    """What a `campaign_recipients` row reserves for a person (once per campaign each)."""

    PRIVATE_REPLY = "private_reply"  # the comment path: one private reply per person
    REVEAL = "reveal"  # taps and DM triggers: the link goes to a person once


class Leg(StrEnum):
    PRIVATE_REPLY = "private_reply"
    PUBLIC_REPLY = "public_reply"


class AttemptClass(StrEnum):
    SENT = "sent"
    REJECTED = "rejected"
    RETRYABLE = "retryable"
    AMBIGUOUS = "ambiguous"


class DmLog(Base):
    __tablename__ = "dm_logs"
    __table_args__ = (
        UniqueConstraint("account_id", "trigger_id"),
        # The delivery log: newest first per workspace, optionally narrowed by state or campaign.
        Index("ix_dm_logs_ws_created", "workspace_id", text("created_at DESC"), text("id DESC")),
        Index(
            "ix_dm_logs_ws_state_created",
            "workspace_id",
            "pr_state",
            text("created_at DESC"),
            text("id DESC"),
        ),
        # The log's trigger filter: the rarer kinds only, so a comment's insert pays nothing
        # (comments are most rows; their filter walks `ix_dm_logs_ws_created`).
        Index(
            "ix_dm_logs_ws_trigger_created",
            "workspace_id",
            "trigger_kind",
            text("created_at DESC"),
            text("id DESC"),
            postgresql_where=text("trigger_kind <> 'comment'"),
        ),
        Index(
            "ix_dm_logs_campaign_created", "campaign_id", text("created_at DESC"), text("id DESC")
        ),
        Index("ix_dm_logs_account_created", "account_id", text("created_at DESC"), text("id DESC")),
        # Username/text search in the log stays an index scan with trigram GIN indexes.
        Index(
            "ix_dm_logs_username_trgm",
            "recipient_username",
            postgresql_using="gin",
            postgresql_ops={"recipient_username": "gin_trgm_ops"},
        ),
        Index(
            "ix_dm_logs_text_trgm",
            "trigger_text",
            postgresql_using="gin",
            postgresql_ops={"trigger_text": "gin_trgm_ops"},
        ),
        # The stale-claim sweep and the due-work relay look only at these small slices.
        Index(
            "ix_dm_logs_pr_in_flight",
            "pr_claimed_at",
            postgresql_where=text("pr_state = 'IN_FLIGHT'"),
        ),
        Index(
            "ix_dm_logs_pub_in_flight",
            "pub_claimed_at",
            postgresql_where=text("pub_state = 'IN_FLIGHT'"),
        ),
        Index(
            "ix_dm_logs_pr_pending_due",
            "pr_next_attempt_at",
            postgresql_where=text("pr_state = 'PENDING'"),
        ),
        Index(
            "ix_dm_logs_pub_pending_due",
            "pub_next_attempt_at",
            postgresql_where=text("pub_state = 'PENDING'"),
        ),
        # UNCONFIRMED private legs whose inbox check has not concluded: the relay's to check.
        Index(
            "ix_dm_logs_pr_unchecked",
            "updated_at",
            postgresql_where=text(
                "pr_state = 'UNCONFIRMED' AND (pr_evidence -> 'inbox_check' ->> 'result') IS NULL"
            ),
        ),
        # A message id confirms at most one delivery: whether Meta's answer carried it or the
        # inbox check found it, a second row can never be credited with the same message.
        Index(
            "uq_dm_logs_account_pr_message",
            "account_id",
            "pr_message_id",
            unique=True,
            postgresql_where=text("pr_message_id IS NOT NULL"),
        ),
        # An account's pacer hands out its waiting private replies earliest deadline first.
        Index(
            "ix_dm_logs_pr_paced",
            "account_id",
            "deadline_at",
            "id",
            postgresql_where=text("trigger_kind = 'comment' AND pr_state = 'PENDING'"),
        ),
        # Its public replies left to the pacer, likewise.
        Index(
            "ix_dm_logs_pub_paced",
            "account_id",
            "deadline_at",
            "id",
            postgresql_where=text("pub_state = 'PENDING' AND pub_queued_at IS NOT NULL"),
        ),
        # A tap's log row points at the person's opening DM or follow prompt it answers.
        Index(
            "ix_dm_logs_tappable",
            "campaign_id",
            "recipient_id",
            text("id DESC"),
            postgresql_where=text("message_kind IN ('opening_dm', 'follow_prompt')"),
        ),
    )

    id: Mapped[BigId]
    workspace_id: Mapped[int] = mapped_column(ForeignKey("workspaces.id", ondelete="CASCADE"))
    account_id: Mapped[int] = mapped_column(ForeignKey("instagram_accounts.id", ondelete="CASCADE"))
    campaign_id: Mapped[int | None] = mapped_column(ForeignKey("campaigns.id", ondelete="SET NULL"))
    campaign_version: Mapped[int | None] = mapped_column(Integer)
    trigger_kind: Mapped[TriggerKind] = mapped_column(str_enum(TriggerKind, "trigger_kind"))
    trigger_id: Mapped[str] = mapped_column(String(255))
    comment_row_id: Mapped[int | None] = mapped_column(
        ForeignKey("comments.id", ondelete="SET NULL"), index=True
    )
    # For follow-ups and postback reveals: the log row this one follows from.
    source_log_id: Mapped[int | None] = mapped_column(
        ForeignKey("dm_logs.id", ondelete="SET NULL"), index=True
    )
    media_id: Mapped[str | None] = mapped_column(String(32))
    recipient_id: Mapped[str | None] = mapped_column(String(32))
    recipient_username: Mapped[str | None] = mapped_column(String(64))
    trigger_text: Mapped[str | None] = mapped_column(Text)
    matched_keyword: Mapped[str | None] = mapped_column(String(50))
    # After this instant Meta refuses the send (7 days for a private reply, 24 h for a DM).
    deadline_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # Rendered text frozen at scheduling time (follow-ups), so later edits don't change it.
    message_text: Mapped[str | None] = mapped_column(Text)
    # What the DM leg sends (set when it is claimed; follow-ups are created knowing it).
    message_kind: Mapped[MessageKind | None] = mapped_column(str_enum(MessageKind, "message_kind"))
    # Postback rows: the tapped button's payload (`reveal:<campaign>[:open]`, `followcheck:…`).
    trigger_payload: Mapped[str | None] = mapped_column(String(100))
    created_at: Mapped[CreatedAt]
    updated_at: Mapped[UpdatedAt]

    pr_state: Mapped[LegState] = mapped_column(
        str_enum(LegState, "leg_state"),
        default=LegState.PENDING,
        server_default=LegState.PENDING.value,
    )
    pr_attempts: Mapped[int] = mapped_column(SmallInteger, default=0, server_default="0")
    # The claim only succeeds while pr_attempts < pr_attempt_limit. Automatic retries never raise
    # it; a creator's manual retry grants a fresh budget by raising it (never by resetting the
    # counter, so attempt numbers keep growing across retries; see DeliveryAttempt.attempt_no).
    pr_attempt_limit: Mapped[int] = mapped_column(SmallInteger, default=3, server_default="3")
    pr_next_attempt_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # When the account's pacer gave this waiting private reply a budget slot (the slot's name
    # derives from it); cleared by the claim. See `app.delivery.send.pacer`.
    pr_granted_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    pr_claimed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    pr_claimed_by: Mapped[str | None] = mapped_column(String(100))
    # Written by the claim's holder just before the request to Meta leaves (NULL from the
    # claim until then): a claim abandoned while it is NULL sent nothing and is safe to retry.
    pr_requested_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    pr_sent_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    pr_message_id: Mapped[str | None] = mapped_column(String(255))
    pr_error_code: Mapped[int | None] = mapped_column(Integer)
    pr_error_subcode: Mapped[int | None] = mapped_column(BigInteger)
    pr_error_message: Mapped[str | None] = mapped_column(Text)
    # How an UNCONFIRMED leg was looked into, or how a SENT one was confirmed.
    pr_evidence: Mapped[dict[str, Any] | None] = mapped_column(JSONB)

    # NULL when the campaign asks for no public reply.
    pub_state: Mapped[LegState | None] = mapped_column(str_enum(LegState, "pub_leg_state"))
    pub_attempts: Mapped[int] = mapped_column(SmallInteger, default=0, server_default="0")
    pub_next_attempt_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # When the public leg was left to the account's pacer for a slot of the public replies'
    # budget, and when the pacer granted it one; both cleared by the claim. See
    # `app.delivery.send.public_pacer`.
    pub_queued_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    pub_granted_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    pub_claimed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    pub_claimed_by: Mapped[str | None] = mapped_column(String(100))
    # The public leg's request note, as `pr_requested_at` is the private leg's.
    pub_requested_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    pub_sent_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    pub_reply_id: Mapped[str | None] = mapped_column(String(64))
    pub_text: Mapped[str | None] = mapped_column(Text)
    pub_error_code: Mapped[int | None] = mapped_column(Integer)
    pub_error_subcode: Mapped[int | None] = mapped_column(BigInteger)
    pub_error_message: Mapped[str | None] = mapped_column(Text)


class DeliveryAttempt(Base):
    """One call to Meta: the timeline behind every log row."""

    __tablename__ = "delivery_attempts"
    __table_args__ = (Index("ix_delivery_attempts_log", "dm_log_id", "id"),)

    id: Mapped[BigId]
    dm_log_id: Mapped[int] = mapped_column(ForeignKey("dm_logs.id", ondelete="CASCADE"))
    leg: Mapped[Leg] = mapped_column(str_enum(Leg, "attempt_leg"))
    # The leg's attempt counter at the claim. Not unique per (dm_log_id, leg): the plain-text
    # fallback after a refused template is a second row under the same claim and number, and
    # an account-level wait (368, 190) refunds the attempt, so the next claim reuses it. The
    # timeline orders by id.
    attempt_no: Mapped[int] = mapped_column(SmallInteger)
    # What was sent: "template", "text" (fallback or plain), "reply", "dm".
    request_kind: Mapped[str] = mapped_column(String(16))
    worker_id: Mapped[str | None] = mapped_column(String(100))
    started_at: Mapped[CreatedAt]
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    latency_ms: Mapped[int | None] = mapped_column(Integer)
    http_status: Mapped[int | None] = mapped_column(SmallInteger)
    meta_code: Mapped[int | None] = mapped_column(Integer)
    meta_subcode: Mapped[int | None] = mapped_column(BigInteger)
    fbtrace_id: Mapped[str | None] = mapped_column(String(64))
    error_message: Mapped[str | None] = mapped_column(Text)
    classification: Mapped[AttemptClass | None] = mapped_column(
        str_enum(AttemptClass, "attempt_class")
    )


class PostbackDelivery(Base):
    """A button tap, claimed once: inserting the key is the claim, a conflict means handled."""

    __tablename__ = "postback_deliveries"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    account_id: Mapped[int] = mapped_column(ForeignKey("instagram_accounts.id", ondelete="CASCADE"))
    campaign_id: Mapped[int | None] = mapped_column(ForeignKey("campaigns.id", ondelete="SET NULL"))
    recipient_id: Mapped[str] = mapped_column(String(32))
    postback_mid: Mapped[str | None] = mapped_column(String(255))
    dm_log_id: Mapped[int | None] = mapped_column(ForeignKey("dm_logs.id", ondelete="SET NULL"))
    created_at: Mapped[CreatedAt]


class CampaignRecipient(Base):
    """Once per person per campaign: the first delivery to claim (campaign, person, purpose)
    owns it. The comment path's private reply and the reveal sent after a tap or a DM are
    separate purposes, so an opening DM never blocks the link it leads to."""

    __tablename__ = "campaign_recipients"

    campaign_id: Mapped[int] = mapped_column(
        ForeignKey("campaigns.id", ondelete="CASCADE"), primary_key=True
    )
    recipient_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    purpose: Mapped[PersonClaim] = mapped_column(
        str_enum(PersonClaim, "person_claim"),
        primary_key=True,
        default=PersonClaim.PRIVATE_REPLY,
        server_default=PersonClaim.PRIVATE_REPLY.value,
    )
    dm_log_id: Mapped[int] = mapped_column(ForeignKey("dm_logs.id", ondelete="CASCADE"), index=True)
    created_at: Mapped[CreatedAt]
