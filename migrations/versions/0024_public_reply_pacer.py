"""the public-reply pacer: a public leg left to it, its grant, a backlog flag per account

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("dm_logs", sa.Column("pub_queued_at", sa.DateTime(timezone=True)))
    op.add_column("dm_logs", sa.Column("pub_granted_at", sa.DateTime(timezone=True)))
    op.add_column("instagram_accounts", sa.Column("pub_backlog_since", sa.DateTime(timezone=True)))
    op.create_index(
        "ix_dm_logs_pub_paced",
        "dm_logs",
        ["account_id", "deadline_at", "id"],
        postgresql_where=sa.text("pub_state = 'PENDING' AND pub_queued_at IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_dm_logs_pub_paced", table_name="dm_logs")
    op.drop_column("instagram_accounts", "pub_backlog_since")
    op.drop_column("dm_logs", "pub_granted_at")
    op.drop_column("dm_logs", "pub_queued_at")
