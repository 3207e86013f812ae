"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # The delivery log searches usernames and comment text with trigram indexes.
    op.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    op.create_table(
        "users",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("email", sa.String(length=320), nullable=False),
        sa.Column("password_hash", sa.String(length=255), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("last_login_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_users")),
        sa.UniqueConstraint("email", name=op.f("uq_users_email")),
    )
    op.create_table(
        "webhook_events",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column(
            "received_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("body", sa.LargeBinary(), nullable=False),
        sa.Column("signature_key", sa.String(length=16), nullable=True),
        sa.Column(
            "status",
            sa.Enum(
                "received",
                "enqueued",
                "processed",
                "rejected",
                name="webhook_status",
                native_enum=False,
                create_constraint=True,
                length=32,
            ),
            server_default="received",
            nullable=False,
        ),
        sa.Column("reject_reason", sa.Text(), nullable=True),
        sa.Column("item_count", sa.Integer(), nullable=True),
        sa.Column("processed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("relayed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("details", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhook_events")),
    )
    op.create_index("ix_webhook_events_received", "webhook_events", ["received_at"], unique=False)
    op.create_index(
        "ix_webhook_events_unprocessed",
        "webhook_events",
        ["id"],
        unique=False,
        postgresql_where=sa.text("status IN ('received', 'enqueued')"),
    )
    op.create_table(
        "workspaces",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("monthly_dm_quota", sa.BigInteger(), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workspaces")),
    )
    op.create_table(
        "idempotency_keys",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("key", sa.String(length=128), nullable=False),
        sa.Column("scope", sa.String(length=64), nullable=False),
        sa.Column("user_id", sa.BigInteger(), nullable=True),
        sa.Column("workspace_id", sa.BigInteger(), nullable=True),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column(
            "status",
            sa.Enum(
                "processing",
                "succeeded",
                "failed_retryable",
                name="idempotency_status",
                native_enum=False,
                create_constraint=True,
                length=32,
            ),
            server_default="processing",
            nullable=False,
        ),
        sa.Column("response", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_idempotency_keys_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["workspace_id"],
            ["workspaces.id"],
            name=op.f("fk_idempotency_keys_workspace_id_workspaces"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_idempotency_keys")),
        sa.UniqueConstraint("scope", "key", name=op.f("uq_idempotency_keys_scope_key")),
    )
    op.create_index("ix_idempotency_keys_expires", "idempotency_keys", ["expires_at"], unique=False)
    op.create_table(
        "instagram_accounts",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("workspace_id", sa.BigInteger(), nullable=False),
        sa.Column("ig_user_id", sa.String(length=32), nullable=False),
        sa.Column("app_scoped_id", sa.String(length=32), nullable=True),
        sa.Column("username", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=True),
        sa.Column("account_type", sa.String(length=32), nullable=True),
        sa.Column("token_ciphertext", sa.LargeBinary(), nullable=True),
        sa.Column("token_key_id", sa.String(length=16), nullable=True),
        sa.Column("token_issued_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("token_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("webhook_subscribed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("webhook_fields", sa.ARRAY(sa.String(length=64)), nullable=True),
        sa.Column(
            "status",
            sa.Enum(
                "active",
                "needs_reauth",
                "paused",
                "disconnected",
                name="account_status",
                native_enum=False,
                create_constraint=True,
                length=32,
            ),
            server_default="active",
            nullable=False,
        ),
        sa.Column("paused_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("status_reason", sa.Text(), nullable=True),
        sa.Column("last_reconciled_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column(
            "connected_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["workspace_id"],
            ["workspaces.id"],
            name=op.f("fk_instagram_accounts_workspace_id_workspaces"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_instagram_accounts")),
        sa.UniqueConstraint("ig_user_id", name=op.f("uq_instagram_accounts_ig_user_id")),
    )
    op.create_index(
        op.f("ix_instagram_accounts_workspace_id"),
        "instagram_accounts",
        ["workspace_id"],
        unique=False,
    )
    op.create_table(
        "usage_counters",
        sa.Column("workspace_id", sa.BigInteger(), nullable=False),
        sa.Column("month", sa.Date(), nullable=False),
        sa.Column("dms_reserved", sa.Integer(), server_default="0", nullable=False),
        sa.ForeignKeyConstraint(
            ["workspace_id"],
            ["workspaces.id"],
            name=op.f("fk_usage_counters_workspace_id_workspaces"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("workspace_id", "month", name=op.f("pk_usage_counters")),
    )
    op.create_table(
        "workspace_members",
        sa.Column("workspace_id", sa.BigInteger(), nullable=False),
        sa.Column("user_id", sa.BigInteger(), nullable=False),
        sa.Column(
            "role",
            sa.Enum(
                "owner",
                "admin",
                "member",
                name="role",
                native_enum=False,
                create_constraint=True,
                length=32,
            ),
            nullable=False,
        ),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_workspace_members_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["workspace_id"],
            ["workspaces.id"],
            name=op.f("fk_workspace_members_workspace_id_workspaces"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("workspace_id", "user_id", name=op.f("pk_workspace_members")),
    )
    op.create_index(
        op.f("ix_workspace_members_user_id"), "workspace_members", ["user_id"], unique=False
    )
    op.create_table(
        "campaigns",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("workspace_id", sa.BigInteger(), nullable=False),
        sa.Column("account_id", sa.BigInteger(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column(
            "status",
            sa.Enum(
                "draft",
                "active",
                "paused",
                "archived",
                name="campaign_status",
                native_enum=False,
                create_constraint=True,
                length=32,
            ),
            server_default="draft",
            nullable=False,
        ),
        sa.Column(
            "scope",
            sa.Enum(
                "post",
                "any_post",
                "next_post",
                name="campaign_scope",
                native_enum=False,
                create_constraint=True,
                length=32,
            ),
            nullable=False,
        ),
        sa.Column("media_id", sa.String(length=32), nullable=True),
        sa.Column("media_caption", sa.Text(), nullable=True),
        sa.Column("armed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("activated_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("keywords", sa.ARRAY(sa.String(length=50)), server_default="{}", nullable=False),
        sa.Column(
            "excluded_keywords", sa.ARRAY(sa.String(length=50)), server_default="{}", nullable=False
        ),
        sa.Column(
            "match_mode",
            sa.Enum(
                "whole_word",
                "contains",
                "exact",
                "any_comment",
                name="match_mode",
                native_enum=False,
                create_constraint=True,
                length=32,
            ),
            server_default="whole_word",
            nullable=False,
        ),
        sa.Column("dm_text", sa.Text(), server_default="", nullable=False),
        sa.Column(
            "buttons", postgresql.JSONB(astext_type=sa.Text()), server_default="[]", nullable=False
        ),
        sa.Column(
            "opening_dm_enabled", sa.Boolean(), server_default=sa.text("false"), nullable=False
        ),
        sa.Column("opening_dm_text", sa.Text(), nullable=True),
        sa.Column("opening_dm_button_title", sa.String(length=20), nullable=True),
        sa.Column(
            "follow_gate_enabled", sa.Boolean(), server_default=sa.text("false"), nullable=False
        ),
        sa.Column("follow_prompt_text", sa.Text(), nullable=True),
        sa.Column("follow_prompt_button_title", sa.String(length=20), nullable=True),
        sa.Column(
            "public_reply_enabled", sa.Boolean(), server_default=sa.text("false"), nullable=False
        ),
        sa.Column("public_replies", sa.ARRAY(sa.Text()), server_default="{}", nullable=False),
        sa.Column(
            "follow_up_enabled", sa.Boolean(), server_default=sa.text("false"), nullable=False
        ),
        sa.Column("follow_up_text", sa.Text(), nullable=True),
        sa.Column("follow_up_delay_minutes", sa.Integer(), server_default="60", nullable=False),
        sa.Column(
            "dm_trigger_enabled", sa.Boolean(), server_default=sa.text("false"), nullable=False
        ),
        sa.Column("once_per_person", sa.Boolean(), server_default=sa.text("true"), nullable=False),
        sa.Column("priority", sa.Integer(), server_default="0", nullable=False),
        sa.Column("version", sa.Integer(), server_default="1", nullable=False),
        sa.Column("created_by_user_id", sa.BigInteger(), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["account_id"],
            ["instagram_accounts.id"],
            name=op.f("fk_campaigns_account_id_instagram_accounts"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["created_by_user_id"],
            ["users.id"],
            name=op.f("fk_campaigns_created_by_user_id_users"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["workspace_id"],
            ["workspaces.id"],
            name=op.f("fk_campaigns_workspace_id_workspaces"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_campaigns")),
    )
    op.create_index(
        "ix_campaigns_account_active",
        "campaigns",
        ["account_id"],
        unique=False,
        postgresql_where=sa.text("status = 'active'"),
    )
    op.create_index(op.f("ix_campaigns_account_id"), "campaigns", ["account_id"], unique=False)
    op.create_index(op.f("ix_campaigns_media_id"), "campaigns", ["media_id"], unique=False)
    op.create_index(op.f("ix_campaigns_workspace_id"), "campaigns", ["workspace_id"], unique=False)
    op.create_table(
        "messaging_events",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("account_id", sa.BigInteger(), nullable=False),
        sa.Column("webhook_event_id", sa.BigInteger(), nullable=True),
        sa.Column(
            "kind",
            sa.Enum(
                "message",
                "echo",
                "postback",
                "reaction",
                "read",
                "referral",
                "edit",
                "optin",
                name="messaging_event_kind",
                native_enum=False,
                create_constraint=True,
                length=32,
            ),
            nullable=False,
        ),
        sa.Column("dedupe_key", sa.String(length=400), nullable=False),
        sa.Column("user_id", sa.String(length=32), nullable=True),
        sa.Column("mid", sa.String(length=255), nullable=True),
        sa.Column("text", sa.Text(), nullable=True),
        sa.Column("payload", sa.Text(), nullable=True),
        sa.Column("occurred_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("opens_window", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        sa.Column(
            "miss_reason",
            sa.Enum(
                "echo",
                "deleted",
                "unsupported",
                "self",
                "no_text",
                "not_a_trigger",
                "no_match",
                "unknown_payload",
                "account_inactive",
                name="messaging_miss_reason",
                native_enum=False,
                create_constraint=True,
                length=32,
            ),
            nullable=True,
        ),
        sa.Column("details", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["account_id"],
            ["instagram_accounts.id"],
            name=op.f("fk_messaging_events_account_id_instagram_accounts"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["webhook_event_id"],
            ["webhook_events.id"],
            name=op.f("fk_messaging_events_webhook_event_id_webhook_events"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_messaging_events")),
        sa.UniqueConstraint(
            "account_id", "dedupe_key", name=op.f("uq_messaging_events_account_id_dedupe_key")
        ),
    )
    op.create_index(
        "ix_messaging_events_person",
        "messaging_events",
        ["account_id", "user_id", sa.literal_column("occurred_at DESC")],
        unique=False,
    )
    op.create_index(
        "ix_messaging_events_window",
        "messaging_events",
        ["account_id", "user_id", sa.literal_column("occurred_at DESC")],
        unique=False,
        postgresql_where=sa.text("opens_window"),
    )
    op.create_table(
        "operational_events",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("workspace_id", sa.BigInteger(), nullable=True),
        sa.Column("account_id", sa.BigInteger(), nullable=True),
        sa.Column("source", sa.String(length=32), nullable=False),
        sa.Column(
            "level",
            sa.Enum(
                "info",
                "warning",
                "error",
                name="event_level",
                native_enum=False,
                create_constraint=True,
                length=32,
            ),
            nullable=False,
        ),
        sa.Column("kind", sa.String(length=64), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("details", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("resolved_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["account_id"],
            ["instagram_accounts.id"],
            name=op.f("fk_operational_events_account_id_instagram_accounts"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["workspace_id"],
            ["workspaces.id"],
            name=op.f("fk_operational_events_workspace_id_workspaces"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_operational_events")),
    )
    op.create_index(
        "ix_operational_events_created",
        "operational_events",
        [sa.literal_column("created_at DESC")],
        unique=False,
    )
    op.create_index(
        "ix_operational_events_ws_created",
        "operational_events",
        ["workspace_id", sa.literal_column("created_at DESC")],
        unique=False,
    )
    op.create_table(
        "comments",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("account_id", sa.BigInteger(), nullable=False),
        sa.Column("comment_id", sa.String(length=32), nullable=False),
        sa.Column("media_id", sa.String(length=32), nullable=True),
        sa.Column("original_media_id", sa.String(length=32), nullable=True),
        sa.Column("parent_id", sa.String(length=32), nullable=True),
        sa.Column("text", sa.Text(), server_default="", nullable=False),
        sa.Column("commenter_id", sa.String(length=32), nullable=True),
        sa.Column("commenter_username", sa.String(length=64), nullable=True),
        sa.Column("commented_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column(
            "first_seen_via",
            sa.Enum(
                "webhook",
                "poll",
                name="seen_via",
                native_enum=False,
                create_constraint=True,
                length=32,
            ),
            nullable=False,
        ),
        sa.Column("webhook_event_id", sa.BigInteger(), nullable=True),
        sa.Column(
            "outcome",
            sa.Enum(
                "matched",
                "missed",
                name="comment_outcome",
                native_enum=False,
                create_constraint=True,
                length=32,
            ),
            nullable=True,
        ),
        sa.Column(
            "miss_reason",
            sa.Enum(
                "no_keyword",
                "excluded_keyword",
                "own_comment",
                "no_active_campaign",
                "no_campaign_for_post",
                "reply_to_comment",
                "unknown_account",
                "account_inactive",
                "empty_text",
                "before_activation",
                name="miss_reason",
                native_enum=False,
                create_constraint=True,
                length=32,
            ),
            nullable=True,
        ),
        sa.Column("campaign_id", sa.BigInteger(), nullable=True),
        sa.Column("matched_keyword", sa.String(length=50), nullable=True),
        sa.Column("decision", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["account_id"],
            ["instagram_accounts.id"],
            name=op.f("fk_comments_account_id_instagram_accounts"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["campaign_id"],
            ["campaigns.id"],
            name=op.f("fk_comments_campaign_id_campaigns"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["webhook_event_id"],
            ["webhook_events.id"],
            name=op.f("fk_comments_webhook_event_id_webhook_events"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_comments")),
        sa.UniqueConstraint(
            "account_id", "comment_id", name=op.f("uq_comments_account_id_comment_id")
        ),
    )
    op.create_index(
        "ix_comments_account_created",
        "comments",
        ["account_id", sa.literal_column("created_at DESC"), sa.literal_column("id DESC")],
        unique=False,
    )
    op.create_index(op.f("ix_comments_campaign_id"), "comments", ["campaign_id"], unique=False)
    op.create_index(
        "ix_comments_misses",
        "comments",
        ["account_id", sa.literal_column("created_at DESC"), sa.literal_column("id DESC")],
        unique=False,
        postgresql_where=sa.text("outcome = 'missed'"),
    )
    op.create_index(
        "ix_comments_misses_text_trgm",
        "comments",
        ["text"],
        unique=False,
        postgresql_using="gin",
        postgresql_ops={"text": "gin_trgm_ops"},
        postgresql_where=sa.text("outcome = 'missed'"),
    )
    op.create_index(
        "ix_comments_misses_username_trgm",
        "comments",
        ["commenter_username"],
        unique=False,
        postgresql_using="gin",
        postgresql_ops={"commenter_username": "gin_trgm_ops"},
        postgresql_where=sa.text("outcome = 'missed'"),
    )
    op.create_table(
        "dm_logs",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("workspace_id", sa.BigInteger(), nullable=False),
        sa.Column("account_id", sa.BigInteger(), nullable=False),
        sa.Column("campaign_id", sa.BigInteger(), nullable=True),
        sa.Column("campaign_version", sa.Integer(), nullable=True),
        sa.Column(
            "trigger_kind",
            sa.Enum(
                "comment",
                "message",
                "postback",
                "follow_up",
                name="trigger_kind",
                native_enum=False,
                create_constraint=True,
                length=32,
            ),
            nullable=False,
        ),
        sa.Column("trigger_id", sa.String(length=255), nullable=False),
        sa.Column("comment_row_id", sa.BigInteger(), nullable=True),
        sa.Column("source_log_id", sa.BigInteger(), nullable=True),
        sa.Column("media_id", sa.String(length=32), nullable=True),
        sa.Column("recipient_id", sa.String(length=32), nullable=True),
        sa.Column("recipient_username", sa.String(length=64), nullable=True),
        sa.Column("trigger_text", sa.Text(), nullable=True),
        sa.Column("matched_keyword", sa.String(length=50), nullable=True),
        sa.Column("deadline_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("message_text", sa.Text(), nullable=True),
        sa.Column(
            "message_kind",
            sa.Enum(
                "reveal",
                "opening_dm",
                "follow_prompt",
                "follow_up",
                name="message_kind",
                native_enum=False,
                create_constraint=True,
                length=32,
            ),
            nullable=True,
        ),
        sa.Column("trigger_payload", sa.String(length=100), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column(
            "pr_state",
            sa.Enum(
                "PENDING",
                "IN_FLIGHT",
                "SENT",
                "FAILED",
                "UNCONFIRMED",
                "SKIPPED_DEDUP",
                "SKIPPED_RATE_LIMIT",
                "SKIPPED_QUOTA",
                "SKIPPED_WINDOW_EXPIRED",
                "SKIPPED_ACCOUNT_PAUSED",
                "SKIPPED_CAMPAIGN_INACTIVE",
                name="leg_state",
                native_enum=False,
                create_constraint=True,
                length=32,
            ),
            server_default="PENDING",
            nullable=False,
        ),
        sa.Column("pr_attempts", sa.SmallInteger(), server_default="0", nullable=False),
        sa.Column("pr_attempt_limit", sa.SmallInteger(), server_default="3", nullable=False),
        sa.Column("pr_next_attempt_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("pr_claimed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("pr_claimed_by", sa.String(length=100), nullable=True),
        sa.Column("pr_sent_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("pr_message_id", sa.String(length=255), nullable=True),
        sa.Column("pr_error_code", sa.Integer(), nullable=True),
        sa.Column("pr_error_subcode", sa.BigInteger(), nullable=True),
        sa.Column("pr_error_message", sa.Text(), nullable=True),
        sa.Column("pr_evidence", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column(
            "pub_state",
            sa.Enum(
                "PENDING",
                "IN_FLIGHT",
                "SENT",
                "FAILED",
                "UNCONFIRMED",
                "SKIPPED_DEDUP",
                "SKIPPED_RATE_LIMIT",
                "SKIPPED_QUOTA",
                "SKIPPED_WINDOW_EXPIRED",
                "SKIPPED_ACCOUNT_PAUSED",
                "SKIPPED_CAMPAIGN_INACTIVE",
                name="pub_leg_state",
                native_enum=False,
                create_constraint=True,
                length=32,
            ),
            nullable=True,
        ),
        sa.Column("pub_attempts", sa.SmallInteger(), server_default="0", nullable=False),
        sa.Column("pub_next_attempt_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("pub_claimed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("pub_claimed_by", sa.String(length=100), nullable=True),
        sa.Column("pub_sent_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("pub_reply_id", sa.String(length=64), nullable=True),
        sa.Column("pub_text", sa.Text(), nullable=True),
        sa.Column("pub_error_code", sa.Integer(), nullable=True),
        sa.Column("pub_error_subcode", sa.BigInteger(), nullable=True),
        sa.Column("pub_error_message", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["account_id"],
            ["instagram_accounts.id"],
            name=op.f("fk_dm_logs_account_id_instagram_accounts"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["campaign_id"],
            ["campaigns.id"],
            name=op.f("fk_dm_logs_campaign_id_campaigns"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["comment_row_id"],
            ["comments.id"],
            name=op.f("fk_dm_logs_comment_row_id_comments"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["source_log_id"],
            ["dm_logs.id"],
            name=op.f("fk_dm_logs_source_log_id_dm_logs"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["workspace_id"],
            ["workspaces.id"],
            name=op.f("fk_dm_logs_workspace_id_workspaces"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_dm_logs")),
        sa.UniqueConstraint(
            "account_id", "trigger_id", name=op.f("uq_dm_logs_account_id_trigger_id")
        ),
    )
    op.create_index(
        "ix_dm_logs_account_created",
        "dm_logs",
        ["account_id", sa.literal_column("created_at DESC"), sa.literal_column("id DESC")],
        unique=False,
    )
    op.create_index(
        "ix_dm_logs_campaign_created",
        "dm_logs",
        ["campaign_id", sa.literal_column("created_at DESC"), sa.literal_column("id DESC")],
        unique=False,
    )
    op.create_index(op.f("ix_dm_logs_comment_row_id"), "dm_logs", ["comment_row_id"], unique=False)
    op.create_index(
        "ix_dm_logs_pr_in_flight",
        "dm_logs",
        ["pr_claimed_at"],
        unique=False,
        postgresql_where=sa.text("pr_state = 'IN_FLIGHT'"),
    )
    op.create_index(
        "ix_dm_logs_pr_pending_due",
        "dm_logs",
        ["pr_next_attempt_at"],
        unique=False,
        postgresql_where=sa.text("pr_state = 'PENDING'"),
    )
    op.create_index(
        "ix_dm_logs_pub_in_flight",
        "dm_logs",
        ["pub_claimed_at"],
        unique=False,
        postgresql_where=sa.text("pub_state = 'IN_FLIGHT'"),
    )
    op.create_index(
        "ix_dm_logs_pub_pending_due",
        "dm_logs",
        ["pub_next_attempt_at"],
        unique=False,
        postgresql_where=sa.text("pub_state = 'PENDING'"),
    )
    op.create_index(op.f("ix_dm_logs_source_log_id"), "dm_logs", ["source_log_id"], unique=False)
    op.create_index(
        "ix_dm_logs_tappable",
        "dm_logs",
        ["campaign_id", "recipient_id", sa.literal_column("id DESC")],
        unique=False,
        postgresql_where=sa.text("message_kind IN ('opening_dm', 'follow_prompt')"),
    )
    op.create_index(
        "ix_dm_logs_text_trgm",
        "dm_logs",
        ["trigger_text"],
        unique=False,
        postgresql_using="gin",
        postgresql_ops={"trigger_text": "gin_trgm_ops"},
    )
    op.create_index(
        "ix_dm_logs_username_trgm",
        "dm_logs",
        ["recipient_username"],
        unique=False,
        postgresql_using="gin",
        postgresql_ops={"recipient_username": "gin_trgm_ops"},
    )
    op.create_index(
        "ix_dm_logs_ws_created",
        "dm_logs",
        ["workspace_id", sa.literal_column("created_at DESC"), sa.literal_column("id DESC")],
        unique=False,
    )
    op.create_index(
        "ix_dm_logs_ws_state_created",
        "dm_logs",
        [
            "workspace_id",
            "pr_state",
            sa.literal_column("created_at DESC"),
            sa.literal_column("id DESC"),
        ],
        unique=False,
    )
    op.create_table(
        "campaign_recipients",
        sa.Column("campaign_id", sa.BigInteger(), nullable=False),
        sa.Column("recipient_id", sa.String(length=32), nullable=False),
        sa.Column(
            "purpose",
            sa.Enum(
                "private_reply",
                "reveal",
                name="person_claim",
                native_enum=False,
                create_constraint=True,
                length=32,
            ),
            server_default="private_reply",
            nullable=False,
        ),
        sa.Column("dm_log_id", sa.BigInteger(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["campaign_id"],
            ["campaigns.id"],
            name=op.f("fk_campaign_recipients_campaign_id_campaigns"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["dm_log_id"],
            ["dm_logs.id"],
            name=op.f("fk_campaign_recipients_dm_log_id_dm_logs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "campaign_id", "recipient_id", "purpose", name=op.f("pk_campaign_recipients")
        ),
    )
    op.create_index(
        op.f("ix_campaign_recipients_dm_log_id"), "campaign_recipients", ["dm_log_id"], unique=False
    )
    op.create_table(
        "delivery_attempts",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("dm_log_id", sa.BigInteger(), nullable=False),
        sa.Column(
            "leg",
            sa.Enum(
                "private_reply",
                "public_reply",
                name="attempt_leg",
                native_enum=False,
                create_constraint=True,
                length=32,
            ),
            nullable=False,
        ),
        sa.Column("attempt_no", sa.SmallInteger(), nullable=False),
        sa.Column("request_kind", sa.String(length=16), nullable=False),
        sa.Column("worker_id", sa.String(length=100), nullable=True),
        sa.Column(
            "started_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("latency_ms", sa.Integer(), nullable=True),
        sa.Column("http_status", sa.SmallInteger(), nullable=True),
        sa.Column("meta_code", sa.Integer(), nullable=True),
        sa.Column("meta_subcode", sa.BigInteger(), nullable=True),
        sa.Column("fbtrace_id", sa.String(length=64), nullable=True),
        sa.Column("error_message", sa.Text(), nullable=True),
        sa.Column(
            "classification",
            sa.Enum(
                "sent",
                "rejected",
                "retryable",
                "ambiguous",
                name="attempt_class",
                native_enum=False,
                create_constraint=True,
                length=32,
            ),
            nullable=True,
        ),
        sa.ForeignKeyConstraint(
            ["dm_log_id"],
            ["dm_logs.id"],
            name=op.f("fk_delivery_attempts_dm_log_id_dm_logs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_delivery_attempts")),
    )
    op.create_index(
        "ix_delivery_attempts_log", "delivery_attempts", ["dm_log_id", "id"], unique=False
    )
    op.create_table(
        "postback_deliveries",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("account_id", sa.BigInteger(), nullable=False),
        sa.Column("campaign_id", sa.BigInteger(), nullable=True),
        sa.Column("recipient_id", sa.String(length=32), nullable=False),
        sa.Column("postback_mid", sa.String(length=255), nullable=True),
        sa.Column("dm_log_id", sa.BigInteger(), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["account_id"],
            ["instagram_accounts.id"],
            name=op.f("fk_postback_deliveries_account_id_instagram_accounts"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["campaign_id"],
            ["campaigns.id"],
            name=op.f("fk_postback_deliveries_campaign_id_campaigns"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["dm_log_id"],
            ["dm_logs.id"],
            name=op.f("fk_postback_deliveries_dm_log_id_dm_logs"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_postback_deliveries")),
    )


def downgrade() -> None:
    op.drop_table("postback_deliveries")
    op.drop_index("ix_delivery_attempts_log", table_name="delivery_attempts")
    op.drop_table("delivery_attempts")
    op.drop_index(op.f("ix_campaign_recipients_dm_log_id"), table_name="campaign_recipients")
    op.drop_table("campaign_recipients")
    op.drop_index("ix_dm_logs_ws_state_created", table_name="dm_logs")
    op.drop_index("ix_dm_logs_ws_created", table_name="dm_logs")
    op.drop_index(
        "ix_dm_logs_username_trgm",
        table_name="dm_logs",
        postgresql_using="gin",
        postgresql_ops={"recipient_username": "gin_trgm_ops"},
    )
    op.drop_index(
        "ix_dm_logs_text_trgm",
        table_name="dm_logs",
        postgresql_using="gin",
        postgresql_ops={"trigger_text": "gin_trgm_ops"},
    )
    op.drop_index(
        "ix_dm_logs_tappable",
        table_name="dm_logs",
        postgresql_where=sa.text("message_kind IN ('opening_dm', 'follow_prompt')"),
    )
    op.drop_index(op.f("ix_dm_logs_source_log_id"), table_name="dm_logs")
    op.drop_index(
        "ix_dm_logs_pub_pending_due",
        table_name="dm_logs",
        postgresql_where=sa.text("pub_state = 'PENDING'"),
    )
    op.drop_index(
        "ix_dm_logs_pub_in_flight",
        table_name="dm_logs",
        postgresql_where=sa.text("pub_state = 'IN_FLIGHT'"),
    )
    op.drop_index(
        "ix_dm_logs_pr_pending_due",
        table_name="dm_logs",
        postgresql_where=sa.text("pr_state = 'PENDING'"),
    )
    op.drop_index(
        "ix_dm_logs_pr_in_flight",
        table_name="dm_logs",
        postgresql_where=sa.text("pr_state = 'IN_FLIGHT'"),
    )
    op.drop_index(op.f("ix_dm_logs_comment_row_id"), table_name="dm_logs")
    op.drop_index("ix_dm_logs_campaign_created", table_name="dm_logs")
    op.drop_index("ix_dm_logs_account_created", table_name="dm_logs")
    op.drop_table("dm_logs")
    op.drop_index(
        "ix_comments_misses_username_trgm",
        table_name="comments",
        postgresql_using="gin",
        postgresql_ops={"commenter_username": "gin_trgm_ops"},
        postgresql_where=sa.text("outcome = 'missed'"),
    )
    op.drop_index(
        "ix_comments_misses_text_trgm",
        table_name="comments",
        postgresql_using="gin",
        postgresql_ops={"text": "gin_trgm_ops"},
        postgresql_where=sa.text("outcome = 'missed'"),
    )
    op.drop_index(
        "ix_comments_misses", table_name="comments", postgresql_where=sa.text("outcome = 'missed'")
    )
    op.drop_index(op.f("ix_comments_campaign_id"), table_name="comments")
    op.drop_index("ix_comments_account_created", table_name="comments")
    op.drop_table("comments")
    op.drop_index("ix_operational_events_ws_created", table_name="operational_events")
    op.drop_index("ix_operational_events_created", table_name="operational_events")
    op.drop_table("operational_events")
    op.drop_index(
        "ix_messaging_events_window",
        table_name="messaging_events",
        postgresql_where=sa.text("opens_window"),
    )
    op.drop_index("ix_messaging_events_person", table_name="messaging_events")
    op.drop_table("messaging_events")
    op.drop_index(op.f("ix_campaigns_workspace_id"), table_name="campaigns")
    op.drop_index(op.f("ix_campaigns_media_id"), table_name="campaigns")
    op.drop_index(op.f("ix_campaigns_account_id"), table_name="campaigns")
    op.drop_index(
        "ix_campaigns_account_active",
        table_name="campaigns",
        postgresql_where=sa.text("status = 'active'"),
    )
    op.drop_table("campaigns")
    op.drop_index(op.f("ix_workspace_members_user_id"), table_name="workspace_members")
    op.drop_table("workspace_members")
    op.drop_table("usage_counters")
    op.drop_index(op.f("ix_instagram_accounts_workspace_id"), table_name="instagram_accounts")
    op.drop_table("instagram_accounts")
    op.drop_index("ix_idempotency_keys_expires", table_name="idempotency_keys")
    op.drop_table("idempotency_keys")
    op.drop_table("workspaces")
    op.drop_index(
        "ix_webhook_events_unprocessed",
        table_name="webhook_events",
        postgresql_where=sa.text("status IN ('received', 'enqueued')"),
    )
    op.drop_index("ix_webhook_events_received", table_name="webhook_events")
    op.drop_table("webhook_events")
    op.drop_table("users")
