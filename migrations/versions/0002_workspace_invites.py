"""workspace invites: a link that lets a second person join a workspace

Only the SHA-256 of an invite's token is stored. The partial unique index allows one open
(not accepted, not revoked) invite per email and workspace.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_OPEN = "accepted_at IS NULL AND revoked_at IS NULL"


def upgrade() -> None:
    op.create_table(
        "workspace_invites",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("workspace_id", sa.BigInteger(), nullable=False),
        sa.Column("email", sa.String(length=320), nullable=False),
        sa.Column(
            "role",
            sa.Enum(
                "owner",
                "admin",
                "member",
                name="role",
                native_enum=False,
                create_constraint=True,
                length=32,
            ),
            nullable=False,
        ),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("invited_by", sa.BigInteger(), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("accepted_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("accepted_by", sa.BigInteger(), nullable=True),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("role <> 'owner'", name=op.f("ck_workspace_invites_not_owner")),
        sa.CheckConstraint(
            "email = lower(email)", name=op.f("ck_workspace_invites_email_lower_case")
        ),
        sa.ForeignKeyConstraint(
            ["workspace_id"],
            ["workspaces.id"],
            name=op.f("fk_workspace_invites_workspace_id_workspaces"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["invited_by"],
            ["users.id"],
            name=op.f("fk_workspace_invites_invited_by_users"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["accepted_by"],
            ["users.id"],
            name=op.f("fk_workspace_invites_accepted_by_users"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workspace_invites")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_workspace_invites_token_hash")),
    )
    op.create_index(
        "uq_workspace_invites_open_email",
        "workspace_invites",
        ["workspace_id", "email"],
        unique=True,
        postgresql_where=sa.text(_OPEN),
    )


def downgrade() -> None:
    op.drop_index(
        "uq_workspace_invites_open_email",
        table_name="workspace_invites",
        postgresql_where=sa.text(_OPEN),
    )
    op.drop_table("workspace_invites")
