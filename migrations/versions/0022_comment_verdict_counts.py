"""comment_verdict_counts: each campaign's verdicts on the ledger's comments, per UTC quarter
hour, kept by triggers on comments and filled here from the comments already there

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# One statement adds `delta` for each verdict in the decisions of `source` (rows with
# `created_at`, `decision`, `delta`). Only the verdicts that make a comment "seen" by the
# campaign are counted, and only for campaigns that still exist (a deleted campaign's counts
# went with it). A (campaign, quarter, verdict) whose deltas cancel out (a row updated
# without changing its decision) is not touched, so such an update takes no lock here.
# In key order, so two statements lock the rows they share in the same order.
_COUNT = """
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
    "insert": ("INSERT", "NEW TABLE AS new_rows", _NEW),
    "update": ("UPDATE", "OLD TABLE AS old_rows NEW TABLE AS new_rows", f"{_NEW} UNION ALL {_OLD}"),
    "delete": ("DELETE", "OLD TABLE AS old_rows", _OLD),
}


def upgrade() -> None:
    op.create_table(
        "comment_verdict_counts",
        sa.Column("campaign_id", sa.BigInteger(), nullable=False),
        sa.Column("quarter", sa.DateTime(timezone=True), nullable=False),
        sa.Column("verdict", sa.String(length=16), nullable=False),
        sa.Column("comments", sa.Integer(), server_default="0", nullable=False),
        sa.ForeignKeyConstraint(
            ["campaign_id"],
            ["campaigns.id"],
            name=op.f("fk_comment_verdict_counts_campaign_id_campaigns"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "campaign_id", "quarter", "verdict", name=op.f("pk_comment_verdict_counts")
        ),
    )
    for name, (event, referencing, source) in _SOURCES.items():
        op.execute(
            f"CREATE FUNCTION comments_verdict_counts_{name}() RETURNS trigger "
            f"LANGUAGE plpgsql AS $fn$ BEGIN {_COUNT.format(source=source)}; "
            "RETURN NULL; END $fn$"
        )
        op.execute(
            f"CREATE TRIGGER comments_verdict_counts_{name} AFTER {event} ON comments "
            f"REFERENCING {referencing} FOR EACH STATEMENT "
            f"EXECUTE FUNCTION comments_verdict_counts_{name}()"
        )
    # CREATE TRIGGER holds off every write to comments until this migration commits, so
    # the fill and the triggers between them count each row once.
    op.execute(_COUNT.format(source="SELECT created_at, decision, 1 AS delta FROM comments"))


def downgrade() -> None:
    for name in _SOURCES:
        op.execute(f"DROP TRIGGER comments_verdict_counts_{name} ON comments")
        op.execute(f"DROP FUNCTION comments_verdict_counts_{name}()")
    op.drop_table("comment_verdict_counts")
