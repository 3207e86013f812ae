"""messaging_events: a partial index for the misses view's story replies and mentions

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        "ix_messaging_events_story_misses",
        "messaging_events",
        ["account_id", sa.literal_column("created_at DESC"), sa.literal_column("id DESC")],
        unique=False,
        postgresql_where=sa.text("details ? 'story_miss'"),
    )


def downgrade() -> None:
    op.drop_index(
        "ix_messaging_events_story_misses",
        table_name="messaging_events",
        postgresql_where=sa.text("details ? 'story_miss'"),
    )
