"""delivery_counts, delivery_totals, delivery_workspace_quarters: a stripe in each key, so
concurrent deliveries of one campaign in one slice add to different rows

Every counting statement upserts the same few rows while deliveries of one campaign go out at
once, and each waits for the one before it to commit (its row lock is held to the commit):
with 16 connections delivering for one campaign, the trigger cut deliveries/s to 0.20 of the
same writes without it (bench/delivery_counts_cost.py). The statement now adds to the row of
its stripe, `pg_backend_pid() % 32`: 8 stripes gave 0.61, 32 gave 0.71 (the rest is the
statement's own work). Readers already sum rows.

Revision ID: 0029
Revises: 0028
Create Date: 2026-12-02
"""

# ruff: noqa: S608 - the SQL is composed from this file's constants; it takes no values

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0029"
down_revision: str | None = "0028"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_STATES = (
    "PENDING",
    "IN_FLIGHT",
    "SENT",
    "FAILED",
    "UNCONFIRMED",
    "SKIPPED_DEDUP",
    "SKIPPED_RATE_LIMIT",
    "SKIPPED_QUOTA",
    "SKIPPED_WINDOW_EXPIRED",
    "SKIPPED_ACCOUNT_PAUSED",
    "SKIPPED_CAMPAIGN_INACTIVE",
)
# Each counted column and what it counts of a dm_logs row `r`.
_COUNTED = [(state.lower(), f"r.pr_state = '{state}'") for state in _STATES] + [
    ("dm_triggers", "r.trigger_kind NOT IN ('comment', 'postback', 'follow_up')"),
    ("link_sent", "r.message_kind = 'reveal' AND r.pr_state = 'SENT'"),
    ("proven", "r.pr_evidence ? 'confirmed_by'"),
    ("proven_by_meta", "(r.pr_evidence ->> 'confirmed_by') = 'meta_already_used'"),
]
_PEOPLE = ("tapped_people", "passed_people")
_KEY = "workspace_id, campaign_id, quarter, account_id, follow_on"

# A delivery's slice, and what it counts for: -1 for a row as it was, +1 as it is now.
_ROWS = (
    "SELECT {sign} AS sign, r.id, r.workspace_id, r.campaign_id, r.account_id, r.recipient_id,"
    " r.created_at,"
    " date_bin('15 minutes', r.created_at, TIMESTAMPTZ '2000-01-01 00:00+00') AS quarter,"
    " r.trigger_kind IN ('postback', 'follow_up') AS follow_on,"
    " r.trigger_kind = 'postback' AND r.trigger_payload LIKE '%\\:open' AS taps_open,"
    + "".join(f" COALESCE({sql}, false) AS c_{name}," for name, sql in _COUNTED)
    + " true AS counted FROM {table} r"
)
# Only rows whose counted values changed (a claim's attempt counter, a timestamp, the public
# reply's leg move nothing).
_CHANGED = (
    "SELECT o.id FROM ({old}) o JOIN ({new}) n USING (id) WHERE"
    " (o.workspace_id, o.campaign_id, o.account_id, o.recipient_id, o.quarter, o.follow_on,"
    " o.taps_open, "
    + ", ".join(f"o.c_{name}" for name, _ in _COUNTED)
    + ") IS DISTINCT FROM (n.workspace_id, n.campaign_id, n.account_id, n.recipient_id,"
    " n.quarter, n.follow_on, n.taps_open, "
    + ", ".join(f"n.c_{name}" for name, _ in _COUNTED)
    + ")"
)
# One statement: the people new to a step (ON CONFLICT DO NOTHING: only a person the key has not
# seen comes back), then every slice's change (`grouped`), added to the slices, the campaign's
# totals and the workspace's slices, each an upsert in key order, so that concurrent statements
# lock the same rows in the same order (the two unreferenced upserts run after the main one).
# A slice whose workspace is being deleted is left to that deletion's cascade; so are a deleted
# campaign's slices and totals (`live`), while its deliveries, now of no campaign, move within
# the workspace's slices.
_PEOPLE_AND_DELTAS = (
    """
, people AS (
    INSERT INTO funnel_people (campaign_id, step, recipient_id, first_log_id, first_at)
    SELECT DISTINCT ON (campaign_id, step, recipient_id)
           campaign_id, step, recipient_id, id, created_at
    FROM (
        SELECT campaign_id, 'tapped' AS step, recipient_id, id, created_at FROM changed
        WHERE sign = 1 AND taps_open
        UNION ALL
        SELECT campaign_id, 'passed', recipient_id, id, created_at FROM changed
        WHERE sign = 1 AND c_link_sent
    ) s
    WHERE campaign_id IS NOT NULL AND recipient_id IS NOT NULL
    ORDER BY campaign_id, step, recipient_id, created_at, id
    ON CONFLICT DO NOTHING
    RETURNING first_log_id, step
), deltas AS (
    SELECT workspace_id, campaign_id, quarter, account_id, follow_on, """
    + ", ".join(f"sign * c_{name}::int AS {name}" for name, _ in _COUNTED)
    + """, 0 AS tapped_people, 0 AS passed_people
    FROM changed
    UNION ALL
    SELECT c.workspace_id, c.campaign_id, c.quarter, c.account_id, c.follow_on, """
    + ", ".join("0" for _ in _COUNTED)
    + """, (p.step = 'tapped')::int, (p.step = 'passed')::int
    FROM people p JOIN changed c ON c.id = p.first_log_id AND c.sign = 1"""
)
_ALL = [n for n, _ in _COUNTED] + list(_PEOPLE)
_STATE_NAMES = [state.lower() for state in _STATES]
_TOTALS_KEY = "workspace_id, campaign_id, account_id, follow_on"
_WS_KEY = "workspace_id, quarter"


STRIPES = 32


def _upsert(
    table: str, key: str, columns: list[str], source: str, *, having: bool, striped: bool
) -> str:
    stripe = f"(pg_backend_pid() % {STRIPES})::smallint" if striped else ""
    into = f"{key}, stripe" if striped else key
    return (
        f"INSERT INTO {table} ({into}, {', '.join(columns)})\nSELECT {key}, "
        + (f"{stripe}, " if striped else "")
        + ", ".join(f"sum({name})" for name in columns)
        + f"\nFROM {source}\nGROUP BY {key}\n"
        + (
            "HAVING " + " OR ".join(f"sum({name}) <> 0" for name in columns) + "\n"
            if having
            else ""
        )
        + f"ORDER BY {key}\nON CONFLICT ({into}) DO UPDATE SET "
        + ", ".join(f"{name} = {table}.{name} + excluded.{name}" for name in columns)
    )


def _apply(striped: bool) -> str:
    """The statement's tail after `changed`: with `striped`, into the row of its stripe (as
    migration 0026 wrote it without)."""
    grouped = (
        _PEOPLE_AND_DELTAS
        + """
), grouped AS (
    SELECT """
        + _KEY
        + ", "
        + ", ".join(f"sum({name}) AS {name}" for name in _ALL)
        + """,
           (d.campaign_id IS NULL
            OR EXISTS (SELECT 1 FROM campaigns k WHERE k.id = d.campaign_id)) AS live
    FROM deltas d
    WHERE EXISTS (SELECT 1 FROM workspaces w WHERE w.id = d.workspace_id)
    GROUP BY """
        + _KEY
        + "\n    HAVING "
        + " OR ".join(f"sum({name}) <> 0" for name in _ALL)
    )
    grouped += (
        "\n), totals AS (\n"
        + _upsert(
            "delivery_totals",
            _TOTALS_KEY,
            _ALL,
            "grouped WHERE live",
            having=False,
            striped=striped,
        )
        + "\n), workspace AS (\n"
        + _upsert(
            "delivery_workspace_quarters",
            _WS_KEY,
            _STATE_NAMES,
            "grouped",
            having=True,
            striped=striped,
        )
    )
    return (
        grouped
        + "\n)\n"
        + _upsert(
            "delivery_counts", _KEY, _ALL, "grouped WHERE live", having=False, striped=striped
        )
    )


def _function(striped: bool) -> str:
    apply = _apply(striped)
    inserted = "WITH changed AS (" + _ROWS.format(sign=1, table="new_rows") + ")" + apply
    deleted = "WITH changed AS (" + _ROWS.format(sign=-1, table="old_rows") + ")" + apply
    updated = (
        "WITH old AS ("
        + _ROWS.format(sign=-1, table="old_rows")
        + "), new AS ("
        + _ROWS.format(sign=1, table="new_rows")
        + "), moved AS ("
        + _CHANGED.format(old="SELECT * FROM old", new="SELECT * FROM new")
        + "), changed AS (SELECT * FROM old WHERE id IN (SELECT id FROM moved)"
        " UNION ALL SELECT * FROM new WHERE id IN (SELECT id FROM moved))" + apply
    )
    return f"""
CREATE OR REPLACE FUNCTION dm_logs_keep_counts() RETURNS trigger LANGUAGE plpgsql AS $body$
BEGIN
    IF TG_OP = 'INSERT' THEN
        {inserted};
    ELSIF TG_OP = 'UPDATE' THEN
        {updated};
    ELSE
        {deleted};
    END IF;
    RETURN NULL;
END
$body$
"""


_TABLES = {
    "delivery_counts": ("uq_delivery_counts_key", _KEY, _ALL),
    "delivery_totals": ("uq_delivery_totals_key", _TOTALS_KEY, _ALL),
    "delivery_workspace_quarters": ("pk_delivery_workspace_quarters", _WS_KEY, _STATE_NAMES),
}


def upgrade() -> None:
    op.execute("LOCK TABLE dm_logs IN SHARE ROW EXCLUSIVE MODE")
    for table, (key_name, key, _) in _TABLES.items():
        op.add_column(
            table, sa.Column("stripe", sa.SmallInteger(), server_default="0", nullable=False)
        )
        if key_name.startswith("pk_"):
            op.drop_constraint(key_name, table, type_="primary")
            op.create_primary_key(key_name, table, [*key.split(", "), "stripe"])
        else:
            op.drop_index(key_name, table_name=table)
            op.create_index(
                key_name,
                table,
                [*key.split(", "), "stripe"],
                unique=True,
                postgresql_nulls_not_distinct=True,
            )
    op.execute(_function(striped=True))


def downgrade() -> None:
    op.execute("LOCK TABLE dm_logs IN SHARE ROW EXCLUSIVE MODE")
    op.execute(_function(striped=False))
    for table, (key_name, key, columns) in _TABLES.items():
        # The stripes of a key become its one row again.
        sums = ", ".join(f"sum({name}) AS {name}" for name in columns)
        op.execute(
            f"CREATE TEMPORARY TABLE merged AS SELECT {key}, {sums} FROM {table} GROUP BY {key}"
        )
        op.execute(f"DELETE FROM {table}")
        op.execute(f"INSERT INTO {table} ({key}, {', '.join(columns)}) SELECT * FROM merged")
        op.execute("DROP TABLE merged")
        if key_name.startswith("pk_"):
            op.drop_constraint(key_name, table, type_="primary")
            op.create_primary_key(key_name, table, key.split(", "))
        else:
            op.drop_index(key_name, table_name=table)
            op.create_index(
                key_name, table, key.split(", "), unique=True, postgresql_nulls_not_distinct=True
            )
        op.drop_column(table, "stripe")
