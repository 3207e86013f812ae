"""dm_logs: when a public reply's request left (pub_requested_at)

The public-reply leg gets the request note the private leg has (0005): written by the claim's
holder just before the reply is posted, so a claim abandoned before that is given back to
PENDING by the stale-claim sweep instead of being called UNCONFIRMED. Legs that may be
mid-send when this runs, or were left uncertain, are taken to have sent their request.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "dm_logs", sa.Column("pub_requested_at", sa.DateTime(timezone=True), nullable=True)
    )
    op.execute(
        "UPDATE dm_logs SET pub_requested_at = COALESCE(pub_claimed_at, created_at) "
        "WHERE pub_state IN ('IN_FLIGHT', 'UNCONFIRMED')"
    )


def downgrade() -> None:
    op.drop_column("dm_logs", "pub_requested_at")
