"""click_days_recount_mark: any UPDATE that changes a workspace's zone marks its per-day taps
to be counted again (`click_days_recount_due`), whoever writes it: a trigger sets the mark in
the same row, so no writer can leave the kept days in the old zone unnoticed

Revision ID: 0036
Revises: 0035
Create Date: 2026-12-02
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0036"
down_revision: str | None = "0035"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        "CREATE FUNCTION workspaces_mark_click_days_recount() RETURNS trigger "
        "LANGUAGE plpgsql AS $fn$ BEGIN NEW.click_days_recount_due := true; RETURN NEW; END $fn$"
    )
    op.execute(
        "CREATE TRIGGER workspaces_click_days_recount BEFORE UPDATE OF time_zone ON workspaces "
        "FOR EACH ROW WHEN (OLD.time_zone IS DISTINCT FROM NEW.time_zone) "
        "EXECUTE FUNCTION workspaces_mark_click_days_recount()"
    )


def downgrade() -> None:
    op.execute("DROP TRIGGER workspaces_click_days_recount ON workspaces")
    op.execute("DROP FUNCTION workspaces_mark_click_days_recount()")
