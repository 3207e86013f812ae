"""dm_logs: drop the partial index of each campaign's link DMs sent; the count is read from the
kept delivery totals (delivery_totals.link_sent) and nothing reads the index, while every link
DM marked SENT paid for an entry in it

Revision ID: 0031
Revises: 0030
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0031"
down_revision: str | None = "0030"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.drop_index(
        "ix_dm_logs_campaign_link_sent",
        table_name="dm_logs",
        postgresql_where=sa.text("pr_state = 'SENT' AND message_kind = 'reveal'"),
    )


def downgrade() -> None:
    op.create_index(
        "ix_dm_logs_campaign_link_sent",
        "dm_logs",
        ["campaign_id", "workspace_id"],
        unique=False,
        postgresql_where=sa.text("pr_state = 'SENT' AND message_kind = 'reveal'"),
    )
