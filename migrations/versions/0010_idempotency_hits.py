"""idempotency_hits: repeats absorbed per account, kind and hour, for the overview

Duplicate webhooks, blocked duplicate sends and repeated dashboard clicks, counted by an
upsert where each is absorbed. A button repeat has no account (NULL), so the bucket's unique
index treats NULLs as equal.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "idempotency_hits",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("workspace_id", sa.BigInteger(), nullable=False),
        sa.Column("account_id", sa.BigInteger(), nullable=True),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("hour", sa.DateTime(timezone=True), nullable=False),
        sa.Column("hits", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["account_id"],
            ["instagram_accounts.id"],
            name=op.f("fk_idempotency_hits_account_id_instagram_accounts"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["workspace_id"],
            ["workspaces.id"],
            name=op.f("fk_idempotency_hits_workspace_id_workspaces"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_idempotency_hits")),
    )
    op.create_index(
        "uq_idempotency_hits_bucket",
        "idempotency_hits",
        ["workspace_id", "account_id", "kind", "hour"],
        unique=True,
        postgresql_nulls_not_distinct=True,
    )


def downgrade() -> None:
    op.drop_index("uq_idempotency_hits_bucket", table_name="idempotency_hits")
    op.drop_table("idempotency_hits")
