"""dm_logs: an index over UNCONFIRMED private legs whose inbox check has not concluded

The due-work relay queues the inbox check again for these (a check whose job was lost with
Redis, or a throttled one whose next try was): the partial index keeps that look to the few
such rows.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_WHERE = "pr_state = 'UNCONFIRMED' AND (pr_evidence -> 'inbox_check' ->> 'result') IS NULL"


def upgrade() -> None:
    op.create_index(
        "ix_dm_logs_pr_unchecked", "dm_logs", ["updated_at"], postgresql_where=sa.text(_WHERE)
    )


def downgrade() -> None:
    op.drop_index("ix_dm_logs_pr_unchecked", table_name="dm_logs", postgresql_where=sa.text(_WHERE))
