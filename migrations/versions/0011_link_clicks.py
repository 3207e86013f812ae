"""link_clicks: one row per visit of a tracked link; campaigns.utm_enabled

Clicks are copied in from the web's click spool, once per click_key (the link and the
request id hashed together).

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "link_clicks",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("click_key", sa.LargeBinary(length=32), nullable=False),
        sa.Column("dm_log_id", sa.BigInteger(), nullable=False),
        sa.Column("workspace_id", sa.BigInteger(), nullable=False),
        sa.Column("campaign_id", sa.BigInteger(), nullable=True),
        sa.Column("recipient_id", sa.String(length=32), nullable=True),
        sa.Column("button", sa.SmallInteger(), nullable=False),
        sa.Column(
            "visit",
            sa.Enum(
                "click",
                "preview",
                name="link_visit",
                native_enum=False,
                create_constraint=True,
                length=32,
            ),
            nullable=False,
        ),
        sa.Column("clicked_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column(
            "recorded_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["campaign_id"],
            ["campaigns.id"],
            name=op.f("fk_link_clicks_campaign_id_campaigns"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["dm_log_id"],
            ["dm_logs.id"],
            name=op.f("fk_link_clicks_dm_log_id_dm_logs"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["workspace_id"],
            ["workspaces.id"],
            name=op.f("fk_link_clicks_workspace_id_workspaces"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_link_clicks")),
        sa.UniqueConstraint("click_key", name=op.f("uq_link_clicks_click_key")),
    )
    op.create_index(
        "ix_link_clicks_campaign_at", "link_clicks", ["campaign_id", "clicked_at"], unique=False
    )
    op.create_index("ix_link_clicks_dm_log", "link_clicks", ["dm_log_id"], unique=False)
    op.create_index(
        "ix_link_clicks_ws_at", "link_clicks", ["workspace_id", "clicked_at"], unique=False
    )
    op.add_column(
        "campaigns",
        sa.Column("utm_enabled", sa.Boolean(), server_default=sa.text("false"), nullable=False),
    )


def downgrade() -> None:
    op.drop_column("campaigns", "utm_enabled")
    op.drop_index("ix_link_clicks_ws_at", table_name="link_clicks")
    op.drop_index("ix_link_clicks_dm_log", table_name="link_clicks")
    op.drop_index("ix_link_clicks_campaign_at", table_name="link_clicks")
    op.drop_table("link_clicks")
