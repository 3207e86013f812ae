"""data_deletion_requests: Meta's data deletion callbacks, answered by confirmation code

One row per request Meta sent (a user and the request's issue time); a repeated request finds
its row and gets the same confirmation code back. The counts say what was deleted or erased,
for the public status page.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "data_deletion_requests",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("confirmation_code", sa.String(length=32), nullable=False),
        sa.Column("instagram_user_id", sa.String(length=32), nullable=False),
        sa.Column("issued_at", sa.BigInteger(), nullable=False),
        sa.Column("accounts_deleted", sa.Integer(), nullable=False),
        sa.Column("comments_anonymised", sa.Integer(), nullable=False),
        sa.Column("messages_anonymised", sa.Integer(), nullable=False),
        sa.Column("deliveries_anonymised", sa.Integer(), nullable=False),
        sa.Column(
            "requested_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("completed_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_data_deletion_requests")),
        sa.UniqueConstraint(
            "confirmation_code", name=op.f("uq_data_deletion_requests_confirmation_code")
        ),
        sa.UniqueConstraint(
            "instagram_user_id",
            "issued_at",
            name=op.f("uq_data_deletion_requests_instagram_user_id_issued_at"),
        ),
    )


def downgrade() -> None:
    op.drop_table("data_deletion_requests")
