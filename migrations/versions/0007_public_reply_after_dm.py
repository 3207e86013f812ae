"""campaigns.public_reply_after_dm: a public reply that says a DM was sent waits for the DM

On (the default), the public reply is posted only once the DM is SENT; off, for a reply that
does not mention the DM, it is posted whatever became of the DM.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "campaigns",
        sa.Column(
            "public_reply_after_dm",
            sa.Boolean(),
            server_default=sa.text("true"),
            nullable=False,
        ),
    )


def downgrade() -> None:
    op.drop_column("campaigns", "public_reply_after_dm")
