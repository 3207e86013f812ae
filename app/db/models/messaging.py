"""The messaging ledger: every `messaging[]` item a webhook brought, once, with its outcome.

Inbound messages, postbacks, reactions, referrals and reads, and the echoes of what the
account itself sent. Two uses beyond the record: an echo is evidence that a send whose answer
was lost did reach the person (look it up by `echo:<mid>` or by person and time), and the
latest inbound interaction per (account, person) is when their 24-hour messaging window
opened (`opens_window`, indexed).

Unique on `(account_id, dedupe_key)`: `message:<mid>`, `echo:<mid>`, `postback:<person>:<mid>`,
`reaction:<person>:<mid>:<action>:<emoji>`, `read:<person>:<mid>`, `referral:<person>:<ms>`,
`edit:<mid>:<n>`, `optin:<person>:<ms>` — so Meta's redeliveries add nothing.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import (
    Boolean,
    DateTime,
    ForeignKey,
    Index,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy import false as sa_false
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, BigId, CreatedAt, str_enum


class MessagingEventKind(StrEnum):
    MESSAGE = "message"
    ECHO = "echo"
    POSTBACK = "postback"
    REACTION = "reaction"
    READ = "read"
    REFERRAL = "referral"
    EDIT = "edit"
    OPTIN = "optin"


class MessagingMissReason(StrEnum):
    """Why an item is only a record, never work."""

    ECHO = "echo"  # our own send coming back
    DELETED = "deleted"  # the person unsent it
    UNSUPPORTED = "unsupported"  # a type Meta cannot show through the API
    SELF = "self"  # the account messaging itself
    NO_TEXT = "no_text"  # attachments only: nothing a keyword could match
    NOT_A_TRIGGER = "not_a_trigger"  # reads, reactions, referrals, edits, opt-ins
    NO_MATCH = "no_match"  # a DM no DM-keyword campaign matched
    UNKNOWN_PAYLOAD = "unknown_payload"  # a tap on a button not ours, or its campaign is gone
    ACCOUNT_INACTIVE = "account_inactive"  # the account is disconnected: no work for it


class MessagingEvent(Base):
    __tablename__ = "messaging_events"
    __table_args__ = (
        UniqueConstraint("account_id", "dedupe_key"),
        # Echo lookups and a person's thread, newest first.
        Index(
            "ix_messaging_events_person",
            "account_id",
            "user_id",
            text("occurred_at DESC"),
        ),
        # "When did this person last open the 24-hour window?"
        # The misses view's story replies and mentions no campaign answered, newest first.
        Index(
            "ix_messaging_events_story_misses",
            "account_id",
            text("created_at DESC"),
            text("id DESC"),
            postgresql_where=text("details ? 'story_miss'"),
        ),
        Index(
            "ix_messaging_events_window",
            "account_id",
            "user_id",
            text("occurred_at DESC"),
            postgresql_where=text("opens_window"),
        ),
    )

    id: Mapped[BigId]
    account_id: Mapped[int] = mapped_column(ForeignKey("instagram_accounts.id", ondelete="CASCADE"))
    webhook_event_id: Mapped[int | None] = mapped_column(
        ForeignKey("webhook_events.id", ondelete="SET NULL")
    )
    kind: Mapped[MessagingEventKind] = mapped_column(
        str_enum(MessagingEventKind, "messaging_event_kind")
    )
    dedupe_key: Mapped[str] = mapped_column(String(400))
    # The person (IGSID): the sender of inbound items, the recipient of echoes.
    user_id: Mapped[str | None] = mapped_column(String(32))
    mid: Mapped[str | None] = mapped_column(String(255))
    text: Mapped[str | None] = mapped_column(Text)
    # Postback payload, quick-reply payload, referral ref, reaction name.
    payload: Mapped[str | None] = mapped_column(Text)
    occurred_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    # An inbound interaction that (re)opens the person's 24-hour window.
    opens_window: Mapped[bool] = mapped_column(Boolean, default=False, server_default=sa_false())
    # NULL: it became work (a DM keyword trigger's or a tap's `dm_logs` row).
    miss_reason: Mapped[MessagingMissReason | None] = mapped_column(
        str_enum(MessagingMissReason, "messaging_miss_reason")
    )
    details: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    created_at: Mapped[CreatedAt]
