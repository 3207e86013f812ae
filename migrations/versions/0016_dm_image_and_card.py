"""campaigns: an image before the DM and a card instead of it (DMs after a tap or a DM)

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("campaigns", sa.Column("dm_image_url", sa.Text(), nullable=True))
    op.add_column(
        "campaigns",
        sa.Column("card_enabled", sa.Boolean(), server_default=sa.text("false"), nullable=False),
    )
    op.add_column("campaigns", sa.Column("card_title", sa.Text(), nullable=True))
    op.add_column("campaigns", sa.Column("card_subtitle", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("campaigns", "card_subtitle")
    op.drop_column("campaigns", "card_title")
    op.drop_column("campaigns", "card_enabled")
    op.drop_column("campaigns", "dm_image_url")
