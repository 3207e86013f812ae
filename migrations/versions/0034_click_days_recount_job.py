"""click_days_recount_due: a change of zone no longer counts the last 31 days of taps again
inside the request (a trigger on `workspaces`); it marks the workspace, and the worker counts
them again (`app.clicks.day_recount`)

Revision ID: 0034
Revises: 0033
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0034"
down_revision: str | None = "0033"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# 0028's function, for the downgrade.
_FILL = """
WITH person AS (
    INSERT INTO link_click_day_people (campaign_id, day, recipient_id)
    SELECT DISTINCT l.campaign_id, (l.clicked_at AT TIME ZONE zone)::date, l.recipient_id
    FROM link_clicks l
    WHERE l.workspace_id = NEW.id AND l.clicked_at >= now() - interval '33 days'
      AND (l.clicked_at AT TIME ZONE zone)::date >= first_day AND l.visit = 'click'
      AND l.campaign_id IS NOT NULL AND l.recipient_id IS NOT NULL
    ON CONFLICT DO NOTHING
    RETURNING campaign_id, day
)
INSERT INTO link_click_days (campaign_id, day, workspace_id, people)
SELECT campaign_id, day, NEW.id, count(*) FROM person
GROUP BY campaign_id, day
ORDER BY campaign_id, day
ON CONFLICT (campaign_id, day) DO UPDATE SET people = link_click_days.people + excluded.people
"""
_REBUILD = (
    "CREATE FUNCTION link_click_days_rebuild() RETURNS trigger LANGUAGE plpgsql "  # noqa: S608 - constants
    "AS $fn$ DECLARE zone text := zone_or_utc(NEW.time_zone); "
    "first_day date := (now() AT TIME ZONE zone_or_utc(NEW.time_zone))::date - 31; BEGIN "
    "DELETE FROM link_click_day_people p USING campaigns c "
    "WHERE c.id = p.campaign_id AND c.workspace_id = NEW.id AND p.day >= first_day; "
    "DELETE FROM link_click_days WHERE workspace_id = NEW.id AND day >= first_day; "
    + _FILL
    + "; RETURN NULL; END $fn$"
)


def upgrade() -> None:
    op.execute("DROP TRIGGER workspaces_link_click_days ON workspaces")
    op.execute("DROP FUNCTION link_click_days_rebuild()")
    op.add_column(
        "workspaces",
        sa.Column(
            "click_days_recount_due", sa.Boolean(), server_default=sa.false(), nullable=False
        ),
    )


def downgrade() -> None:
    op.drop_column("workspaces", "click_days_recount_due")
    op.execute(_REBUILD)
    op.execute(
        "CREATE TRIGGER workspaces_link_click_days AFTER UPDATE OF time_zone ON workspaces "
        "FOR EACH ROW WHEN (OLD.time_zone IS DISTINCT FROM NEW.time_zone) "
        "EXECUTE FUNCTION link_click_days_rebuild()"
    )
