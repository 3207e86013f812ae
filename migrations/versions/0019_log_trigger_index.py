"""dm_logs: a partial index for the log's trigger filter (every kind but comments)

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        "ix_dm_logs_ws_trigger_created",
        "dm_logs",
        [
            "workspace_id",
            "trigger_kind",
            sa.literal_column("created_at DESC"),
            sa.literal_column("id DESC"),
        ],
        unique=False,
        postgresql_where=sa.text("trigger_kind <> 'comment'"),
    )


def downgrade() -> None:
    op.drop_index(
        "ix_dm_logs_ws_trigger_created",
        table_name="dm_logs",
        postgresql_where=sa.text("trigger_kind <> 'comment'"),
    )
