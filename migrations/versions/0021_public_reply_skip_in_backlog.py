"""campaigns.public_reply_skip_in_backlog: skip the public reply while private replies wait
for the account's hourly limit

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "campaigns",
        sa.Column(
            "public_reply_skip_in_backlog",
            sa.Boolean(),
            nullable=False,
            server_default=sa.false(),
        ),
    )


def downgrade() -> None:
    op.drop_column("campaigns", "public_reply_skip_in_backlog")
