"""link_click_days, link_click_day_people: the people who tapped a campaign's links each day of
the workspace's time zone, kept as clicks are copied in, rebuilt by a trigger when the zone
changes, filled here for the funnel's window

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0025"
down_revision: str | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# A zone name PostgreSQL knows, or UTC: a stored zone it does not know (its tz database older
# than Python's) must never stop clicks from being recorded.
_ZONE_OR_UTC = """
CREATE FUNCTION zone_or_utc(name text) RETURNS text LANGUAGE plpgsql STABLE AS $fn$
BEGIN
    PERFORM now() AT TIME ZONE name;
    RETURN name;
EXCEPTION WHEN invalid_parameter_value THEN
    RETURN 'UTC';
END $fn$
"""
# The clicks of the last 32 days: older days are outside the funnel's window (30 days) in any
# zone, so neither the fill nor a rebuild counts them.
_FILL = """
WITH person AS (
    INSERT INTO link_click_day_people (campaign_id, day, recipient_id)
    SELECT DISTINCT l.campaign_id, (l.clicked_at AT TIME ZONE zone_or_utc(w.time_zone))::date,
           l.recipient_id
    FROM link_clicks l JOIN workspaces w ON w.id = l.workspace_id
    WHERE {where} AND l.clicked_at >= now() - interval '32 days' AND l.visit = 'click'
      AND l.campaign_id IS NOT NULL AND l.recipient_id IS NOT NULL
    ON CONFLICT DO NOTHING
    RETURNING campaign_id, day
)
INSERT INTO link_click_days (campaign_id, day, workspace_id, people)
SELECT p.campaign_id, p.day, c.workspace_id, count(*)
FROM person p JOIN campaigns c ON c.id = p.campaign_id
GROUP BY p.campaign_id, p.day, c.workspace_id
ORDER BY p.campaign_id, p.day
ON CONFLICT (campaign_id, day) DO UPDATE SET people = link_click_days.people + excluded.people
"""
# A workspace's new zone: its days are counted again from the raw clicks of the window. The
# click copier holds the workspace row FOR SHARE while it counts (`app.clicks.rollup`), so
# this UPDATE's row lock waits for copies in progress to commit (this rebuild then sees
# their clicks), and copies after it wait for this commit and count in the new zone.
_REBUILD = (
    "CREATE FUNCTION link_click_days_rebuild() RETURNS trigger LANGUAGE plpgsql AS $fn$ BEGIN "  # noqa: S608 - constants
    "DELETE FROM link_click_day_people p USING campaigns c "
    "WHERE c.id = p.campaign_id AND c.workspace_id = NEW.id; "
    "DELETE FROM link_click_days WHERE workspace_id = NEW.id; "
    + _FILL.format(where="l.workspace_id = NEW.id")
    + "; RETURN NULL; END $fn$"
)


def upgrade() -> None:
    op.create_table(
        "link_click_day_people",
        sa.Column("campaign_id", sa.BigInteger(), nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("recipient_id", sa.String(length=32), nullable=False),
        sa.ForeignKeyConstraint(
            ["campaign_id"],
            ["campaigns.id"],
            name=op.f("fk_link_click_day_people_campaign_id_campaigns"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "campaign_id", "day", "recipient_id", name=op.f("pk_link_click_day_people")
        ),
    )
    op.create_table(
        "link_click_days",
        sa.Column("campaign_id", sa.BigInteger(), nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("workspace_id", sa.BigInteger(), nullable=False),
        sa.Column("people", sa.Integer(), server_default="0", nullable=False),
        sa.ForeignKeyConstraint(
            ["campaign_id"],
            ["campaigns.id"],
            name=op.f("fk_link_click_days_campaign_id_campaigns"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["workspace_id"],
            ["workspaces.id"],
            name=op.f("fk_link_click_days_workspace_id_workspaces"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("campaign_id", "day", name=op.f("pk_link_click_days")),
    )
    op.create_index("ix_link_click_days_workspace", "link_click_days", ["workspace_id"])
    op.execute(_ZONE_OR_UTC)
    op.execute(_REBUILD)
    op.execute(
        "CREATE TRIGGER workspaces_link_click_days AFTER UPDATE OF time_zone ON workspaces "
        "FOR EACH ROW WHEN (OLD.time_zone IS DISTINCT FROM NEW.time_zone) "
        "EXECUTE FUNCTION link_click_days_rebuild()"
    )
    op.execute(_FILL.format(where="TRUE"))


def downgrade() -> None:
    op.execute("DROP TRIGGER workspaces_link_click_days ON workspaces")
    op.execute("DROP FUNCTION link_click_days_rebuild()")
    op.execute("DROP FUNCTION zone_or_utc(text)")
    op.drop_index("ix_link_click_days_workspace", table_name="link_click_days")
    op.drop_table("link_click_days")
    op.drop_table("link_click_day_people")
