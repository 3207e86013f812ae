"""link_click_days_rebuild: a change of zone counts again only the days the funnel can show
(the last 31), and leaves older days as they were

Revision ID: 0028
Revises: 0027
Create Date: 2026-12-02
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0028"
down_revision: str | None = "0027"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The days from `first_day` on (the funnel shows 30) are deleted and counted again from the
# clicks of those days in the new zone; older days keep their counts in the old zone, which no
# page reads. 33 days of clicks hold every click of a local day from `first_day` in any zone.
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
    "CREATE OR REPLACE FUNCTION link_click_days_rebuild() RETURNS trigger LANGUAGE plpgsql "  # noqa: S608 - constants
    "AS $fn$ DECLARE zone text := zone_or_utc(NEW.time_zone); "
    "first_day date := (now() AT TIME ZONE zone_or_utc(NEW.time_zone))::date - 31; BEGIN "
    "DELETE FROM link_click_day_people p USING campaigns c "
    "WHERE c.id = p.campaign_id AND c.workspace_id = NEW.id AND p.day >= first_day; "
    "DELETE FROM link_click_days WHERE workspace_id = NEW.id AND day >= first_day; "
    + _FILL
    + "; RETURN NULL; END $fn$"
)
# 0025's function: every day of the workspace, from the last 32 days' clicks.
_PREVIOUS = """
CREATE OR REPLACE FUNCTION link_click_days_rebuild() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
DELETE FROM link_click_day_people p USING campaigns c
WHERE c.id = p.campaign_id AND c.workspace_id = NEW.id;
DELETE FROM link_click_days WHERE workspace_id = NEW.id;
WITH person AS (
    INSERT INTO link_click_day_people (campaign_id, day, recipient_id)
    SELECT DISTINCT l.campaign_id, (l.clicked_at AT TIME ZONE zone_or_utc(w.time_zone))::date,
           l.recipient_id
    FROM link_clicks l JOIN workspaces w ON w.id = l.workspace_id
    WHERE l.workspace_id = NEW.id AND l.clicked_at >= now() - interval '32 days'
      AND l.visit = 'click' AND l.campaign_id IS NOT NULL AND l.recipient_id IS NOT NULL
    ON CONFLICT DO NOTHING
    RETURNING campaign_id, day
)
INSERT INTO link_click_days (campaign_id, day, workspace_id, people)
SELECT p.campaign_id, p.day, c.workspace_id, count(*)
FROM person p JOIN campaigns c ON c.id = p.campaign_id
GROUP BY p.campaign_id, p.day, c.workspace_id
ORDER BY p.campaign_id, p.day
ON CONFLICT (campaign_id, day) DO UPDATE SET people = link_click_days.people + excluded.people;
RETURN NULL;
END $fn$
"""


def upgrade() -> None:
    op.execute(_REBUILD)


def downgrade() -> None:
    op.execute(_PREVIOUS)
