"""instagram_accounts.granted_permissions: what the creator granted on Instagram's screen

The token exchange reports the permissions granted, and a person can refuse one; the setup
doctor compares them with the three OnceReply needs. NULL for accounts connected before.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "instagram_accounts",
        sa.Column("granted_permissions", postgresql.ARRAY(sa.String(length=64)), nullable=True),
    )


def downgrade() -> None:
    op.drop_column("instagram_accounts", "granted_permissions")
