"""link_click_hours, link_click_people, link_click_button_people: click counts kept as clicks
are copied in, filled here from the clicks already recorded

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_FILL_PEOPLE = """
INSERT INTO link_click_people (campaign_id, recipient_id, button, first_clicked_at)
SELECT DISTINCT ON (campaign_id, recipient_id) campaign_id, recipient_id, button, clicked_at
FROM link_clicks
WHERE visit = 'click' AND campaign_id IS NOT NULL AND recipient_id IS NOT NULL
ORDER BY campaign_id, recipient_id, clicked_at, button
"""
_FILL_BUTTON_PEOPLE = """
INSERT INTO link_click_button_people (campaign_id, button, recipient_id, first_clicked_at)
SELECT DISTINCT ON (campaign_id, button, recipient_id)
       campaign_id, button, recipient_id, clicked_at
FROM link_clicks
WHERE visit = 'click' AND campaign_id IS NOT NULL AND recipient_id IS NOT NULL
ORDER BY campaign_id, button, recipient_id, clicked_at
"""
_FILL_HOURS = """
INSERT INTO link_click_hours
    (campaign_id, hour, button, workspace_id, taps, previews, people, button_people)
SELECT campaign_id, hour, button, max(workspace_id), sum(taps), sum(previews), sum(people),
       sum(button_people)
FROM (
    SELECT campaign_id, date_trunc('hour', clicked_at, 'UTC') AS hour, button, workspace_id,
           (visit = 'click')::int AS taps, (visit = 'preview')::int AS previews,
           0 AS people, 0 AS button_people
    FROM link_clicks WHERE campaign_id IS NOT NULL
    UNION ALL
    SELECT campaign_id, date_trunc('hour', first_clicked_at, 'UTC'), button, NULL, 0, 0, 1, 0
    FROM link_click_people
    UNION ALL
    SELECT campaign_id, date_trunc('hour', first_clicked_at, 'UTC'), button, NULL, 0, 0, 0, 1
    FROM link_click_button_people
) deltas
GROUP BY campaign_id, hour, button
"""


def upgrade() -> None:
    op.create_table(
        "link_click_button_people",
        sa.Column("campaign_id", sa.BigInteger(), nullable=False),
        sa.Column("button", sa.SmallInteger(), nullable=False),
        sa.Column("recipient_id", sa.String(length=32), nullable=False),
        sa.Column("first_clicked_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["campaign_id"],
            ["campaigns.id"],
            name=op.f("fk_link_click_button_people_campaign_id_campaigns"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "campaign_id", "button", "recipient_id", name=op.f("pk_link_click_button_people")
        ),
    )
    op.create_table(
        "link_click_hours",
        sa.Column("campaign_id", sa.BigInteger(), nullable=False),
        sa.Column("hour", sa.DateTime(timezone=True), nullable=False),
        sa.Column("button", sa.SmallInteger(), nullable=False),
        sa.Column("workspace_id", sa.BigInteger(), nullable=False),
        sa.Column("taps", sa.Integer(), server_default="0", nullable=False),
        sa.Column("previews", sa.Integer(), server_default="0", nullable=False),
        sa.Column("people", sa.Integer(), server_default="0", nullable=False),
        sa.Column("button_people", sa.Integer(), server_default="0", nullable=False),
        sa.ForeignKeyConstraint(
            ["campaign_id"],
            ["campaigns.id"],
            name=op.f("fk_link_click_hours_campaign_id_campaigns"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["workspace_id"],
            ["workspaces.id"],
            name=op.f("fk_link_click_hours_workspace_id_workspaces"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("campaign_id", "hour", "button", name=op.f("pk_link_click_hours")),
    )
    op.create_index(
        "ix_link_click_hours_ws_hour", "link_click_hours", ["workspace_id", "hour"], unique=False
    )
    op.create_table(
        "link_click_people",
        sa.Column("campaign_id", sa.BigInteger(), nullable=False),
        sa.Column("recipient_id", sa.String(length=32), nullable=False),
        sa.Column("button", sa.SmallInteger(), nullable=False),
        sa.Column("first_clicked_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["campaign_id"],
            ["campaigns.id"],
            name=op.f("fk_link_click_people_campaign_id_campaigns"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("campaign_id", "recipient_id", name=op.f("pk_link_click_people")),
    )
    op.execute(_FILL_PEOPLE)
    op.execute(_FILL_BUTTON_PEOPLE)
    op.execute(_FILL_HOURS)


def downgrade() -> None:
    op.drop_table("link_click_people")
    op.drop_index("ix_link_click_hours_ws_hour", table_name="link_click_hours")
    op.drop_table("link_click_hours")
    op.drop_table("link_click_button_people")
