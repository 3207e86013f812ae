"""the private-reply pacer: a grant per waiting row, a backlog flag per account, and its index

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("dm_logs", sa.Column("pr_granted_at", sa.DateTime(timezone=True)))
    op.add_column("instagram_accounts", sa.Column("pr_backlog_since", sa.DateTime(timezone=True)))
    op.create_index(
        "ix_dm_logs_pr_paced",
        "dm_logs",
        ["account_id", "deadline_at", "id"],
        postgresql_where=sa.text("trigger_kind = 'comment' AND pr_state = 'PENDING'"),
    )


def downgrade() -> None:
    op.drop_index("ix_dm_logs_pr_paced", table_name="dm_logs")
    op.drop_column("instagram_accounts", "pr_backlog_since")
    op.drop_column("dm_logs", "pr_granted_at")
