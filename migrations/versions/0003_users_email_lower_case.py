"""users: email must be stored lower-case, as workspace_invites.email already is

Every writer lower-cases the email (app.workspaces.service.normalize_email), which is what
makes the unique key case-insensitive; the check turns a writer that forgets into an error
instead of a second account. Alembic's autogenerate does not compare CHECK constraints, so
this one is written by hand.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_check_constraint(op.f("ck_users_email_lower_case"), "users", "email = lower(email)")


def downgrade() -> None:
    op.drop_constraint(op.f("ck_users_email_lower_case"), "users", type_="check")
