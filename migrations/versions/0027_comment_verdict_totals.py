"""comment_verdict_totals: each campaign's verdicts on the ledger's comments in all, kept by the
same triggers on comments as the quarter-hour counts, filled here from those counts

Revision ID: 0027
Revises: 0026
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0027"
down_revision: str | None = "0026"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# As 0022's statement, plus the totals per (campaign, verdict) from the same deltas: the
# funnel's totals then read four rows, not every quarter hour the campaign has seen. The
# quarter rows are locked first (the main statement), the totals after (a data-modifying
# CTE no one reads runs last), each in key order, in every statement alike.
_COUNT = """
WITH d AS (
    SELECT campaign_id, quarter, verdict, sum(delta) AS delta
    FROM (
        SELECT (e ->> 'campaign_id')::bigint AS campaign_id,
               date_bin('15 minutes', r.created_at, TIMESTAMPTZ '2000-01-01 00:00:00+00')
                   AS quarter,
               e ->> 'verdict' AS verdict, r.delta
        FROM ({source}) r
        CROSS JOIN LATERAL jsonb_array_elements(
            CASE WHEN jsonb_typeof(r.decision -> 'considered') = 'array'
                 THEN r.decision -> 'considered' END) e
        WHERE e ->> 'verdict' IN ('won', 'lost', 'excluded', 'no_keyword')
          AND jsonb_typeof(e -> 'campaign_id') = 'number'
    ) x
    WHERE campaign_id IN (SELECT id FROM campaigns)
    GROUP BY campaign_id, quarter, verdict
    HAVING sum(delta) <> 0
), totals AS (
    INSERT INTO comment_verdict_totals AS t (campaign_id, verdict, comments)
    SELECT campaign_id, verdict, sum(delta) FROM d
    GROUP BY campaign_id, verdict
    HAVING sum(delta) <> 0
    ORDER BY campaign_id, verdict
    ON CONFLICT (campaign_id, verdict) DO UPDATE SET comments = t.comments + excluded.comments
)
INSERT INTO comment_verdict_counts AS k (campaign_id, quarter, verdict, comments)
SELECT campaign_id, quarter, verdict, delta FROM d
ORDER BY campaign_id, quarter, verdict
ON CONFLICT (campaign_id, quarter, verdict)
    DO UPDATE SET comments = k.comments + excluded.comments
"""
_OLD_COUNT = """
INSERT INTO comment_verdict_counts AS k (campaign_id, quarter, verdict, comments)
SELECT campaign_id, quarter, verdict, sum(delta)
FROM (
    SELECT (e ->> 'campaign_id')::bigint AS campaign_id,
           date_bin('15 minutes', r.created_at, TIMESTAMPTZ '2000-01-01 00:00:00+00')
               AS quarter,
           e ->> 'verdict' AS verdict, r.delta
    FROM ({source}) r
    CROSS JOIN LATERAL jsonb_array_elements(
        CASE WHEN jsonb_typeof(r.decision -> 'considered') = 'array'
             THEN r.decision -> 'considered' END) e
    WHERE e ->> 'verdict' IN ('won', 'lost', 'excluded', 'no_keyword')
      AND jsonb_typeof(e -> 'campaign_id') = 'number'
) d
WHERE campaign_id IN (SELECT id FROM campaigns)
GROUP BY campaign_id, quarter, verdict
HAVING sum(delta) <> 0
ORDER BY campaign_id, quarter, verdict
ON CONFLICT (campaign_id, quarter, verdict)
    DO UPDATE SET comments = k.comments + excluded.comments
"""
_NEW = "SELECT created_at, decision, 1 AS delta FROM new_rows"
_OLD = "SELECT created_at, decision, -1 AS delta FROM old_rows"
_SOURCES = {
    "insert": _NEW,
    "update": f"{_NEW} UNION ALL {_OLD}",
    "delete": _OLD,
}


def _functions(template: str) -> None:
    for name, source in _SOURCES.items():
        op.execute(
            f"CREATE OR REPLACE FUNCTION comments_verdict_counts_{name}() RETURNS trigger "
            f"LANGUAGE plpgsql AS $fn$ BEGIN {template.format(source=source)}; "
            "RETURN NULL; END $fn$"
        )


def upgrade() -> None:
    op.create_table(
        "comment_verdict_totals",
        sa.Column("campaign_id", sa.BigInteger(), nullable=False),
        sa.Column("verdict", sa.String(length=16), nullable=False),
        sa.Column("comments", sa.Integer(), server_default="0", nullable=False),
        sa.ForeignKeyConstraint(
            ["campaign_id"],
            ["campaigns.id"],
            name=op.f("fk_comment_verdict_totals_campaign_id_campaigns"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("campaign_id", "verdict", name=op.f("pk_comment_verdict_totals")),
    )
    # No comment is written between the fill and the new functions: both see the same rows.
    op.execute("LOCK TABLE comments IN SHARE ROW EXCLUSIVE MODE")
    _functions(_COUNT)
    op.execute(
        "INSERT INTO comment_verdict_totals (campaign_id, verdict, comments) "
        "SELECT campaign_id, verdict, sum(comments) FROM comment_verdict_counts "
        "GROUP BY campaign_id, verdict HAVING sum(comments) <> 0"
    )


def downgrade() -> None:
    op.execute("LOCK TABLE comments IN SHARE ROW EXCLUSIVE MODE")
    _functions(_OLD_COUNT)
    op.drop_table("comment_verdict_totals")
