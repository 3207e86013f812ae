"""comment_verdict_counts, comment_verdict_totals: a stripe in each key, so concurrent ingest
runs of one campaign add to different rows

In a surge every comment of a campaign lands in the same quarter hour with the same verdict,
so every ingest transaction upserted the same two rows and held their locks to its commit:
the runs queued behind one another and comments reached the ledger minutes late (bench.burst).
Each statement now adds to the rows of its stripe, `pg_backend_pid() % 32`, as the delivery
counts do (0029). Readers sum a key's rows; a stripe alone may go below zero (a comment
counted by one connection and re-decided by another), the sum of a key's stripes never does.

Revision ID: 0030
Revises: 0029
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0030"
down_revision: str | None = "0029"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# 0027's statement with the writing connection's stripe in each key. The quarter rows are
# locked first (the main statement), the totals after (a data-modifying CTE no one reads runs
# last), each in key order, in every statement alike.
_TEMPLATE = """
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
    INSERT INTO comment_verdict_totals AS t (campaign_id, verdict, stripe, comments)
    SELECT campaign_id, verdict, {stripe}, sum(delta) FROM d
    GROUP BY campaign_id, verdict
    HAVING sum(delta) <> 0
    ORDER BY campaign_id, verdict
    ON CONFLICT (campaign_id, verdict, stripe)
        DO UPDATE SET comments = t.comments + excluded.comments
)
INSERT INTO comment_verdict_counts AS k (campaign_id, quarter, verdict, stripe, comments)
SELECT campaign_id, quarter, verdict, {stripe}, delta FROM d
ORDER BY campaign_id, quarter, verdict
ON CONFLICT (campaign_id, quarter, verdict, stripe)
    DO UPDATE SET comments = k.comments + excluded.comments
"""
_STRIPE = "pg_backend_pid() % 32"
_NEW = "SELECT created_at, decision, 1 AS delta FROM new_rows"
_OLD = "SELECT created_at, decision, -1 AS delta FROM old_rows"
_SOURCES = {
    "insert": _NEW,
    "update": f"{_NEW} UNION ALL {_OLD}",
    "delete": _OLD,
}
_KEYS = {
    "comment_verdict_counts": ("campaign_id", "quarter", "verdict"),
    "comment_verdict_totals": ("campaign_id", "verdict"),
}


def _functions(*, striped: bool) -> None:
    template = _TEMPLATE.replace("{stripe}", _STRIPE)
    if not striped:
        template = (
            template.replace(f", {_STRIPE}", "")
            .replace(", stripe, comments)", ", comments)")
            .replace(", stripe)", ")")
        )
    for name, source in _SOURCES.items():
        body = template.format(source=source)
        op.execute(
            f"CREATE OR REPLACE FUNCTION comments_verdict_counts_{name}() RETURNS trigger "
            f"LANGUAGE plpgsql AS $fn$ BEGIN {body}; RETURN NULL; END $fn$"
        )


def upgrade() -> None:
    # No comment is counted while the keys and the statements change.
    op.execute("LOCK TABLE comments IN SHARE ROW EXCLUSIVE MODE")
    for table, key in _KEYS.items():
        op.add_column(
            table, sa.Column("stripe", sa.SmallInteger(), server_default="0", nullable=False)
        )
        op.drop_constraint(f"pk_{table}", table, type_="primary")
        op.create_primary_key(f"pk_{table}", table, [*key, "stripe"])
    _functions(striped=True)


def downgrade() -> None:
    op.execute("LOCK TABLE comments IN SHARE ROW EXCLUSIVE MODE")
    _functions(striped=False)
    for table, key in _KEYS.items():
        columns = ", ".join(key)
        op.execute(
            f"CREATE TEMPORARY TABLE merged AS SELECT {columns}, "  # noqa: S608
            f"sum(comments) AS comments FROM {table} GROUP BY {columns}"
        )
        op.execute(f"DELETE FROM {table}")  # noqa: S608
        op.drop_constraint(f"pk_{table}", table, type_="primary")
        op.drop_column(table, "stripe")
        op.execute(
            f"INSERT INTO {table} ({columns}, comments) "  # noqa: S608
            f"SELECT {columns}, comments FROM merged"
        )
        op.execute("DROP TABLE merged")
        op.create_primary_key(f"pk_{table}", table, list(key))
