"""delivery_counts, delivery_totals, delivery_workspace_quarters: deliveries waiting to be sent
(PENDING) and being sent (IN_FLIGHT) counted in one column, `unsettled`, so a claim moves no
count and the trigger returns before its counting statement

Every delivery's claim moves its row from PENDING to IN_FLIGHT, and each claim ran the whole
counting statement for it (-1 pending, +1 in flight, in three tables), a move no screen shows:
the overview and a campaign's report add the two up as "waiting", and a send is in flight for
a second or so. Now only a delivery's creation and its outcome run the statement.

The guard before it (migration 0033) compared the raw columns the counts are computed from;
it now compares them as the counts read them: the state with PENDING and IN_FLIGHT as one, a
link DM SENT rather than the message's kind (a claim writes the kind), and the evidence's
`confirmed_by` rather than the whole evidence (a claim may add to it). The INSERT and DELETE
branches still return on an empty transition table (0035). The slices' upsert no longer groups
its rows again: `grouped` is one row per slice already.

Revision ID: 0037
Revises: 0036
Create Date: 2026-12-03
"""

# ruff: noqa: S608 - the SQL is composed from this file's constants; it takes no values

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

import sqlalchemy as sa
from alembic import op

revision: str = "0037"
down_revision: str | None = "0036"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_UNSETTLED = ("PENDING", "IN_FLIGHT")
_FINAL = (
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
_STATE_COUNTED = [("unsettled", "r.pr_state IN ('PENDING', 'IN_FLIGHT')")] + [
    (state.lower(), f"r.pr_state = '{state}'") for state in _FINAL
]
# Each counted column and what it counts of a dm_logs row `r`.
_COUNTED = [
    *_STATE_COUNTED,
    ("dm_triggers", "r.trigger_kind NOT IN ('comment', 'postback', 'follow_up')"),
    ("link_sent", "r.message_kind = 'reveal' AND r.pr_state = 'SENT'"),
    ("proven", "r.pr_evidence ? 'confirmed_by'"),
    ("proven_by_meta", "(r.pr_evidence ->> 'confirmed_by') = 'meta_already_used'"),
]
_PEOPLE = ("tapped_people", "passed_people")
_ALL = [n for n, _ in _COUNTED] + list(_PEOPLE)
_STATE_NAMES = [n for n, _ in _STATE_COUNTED]
_KEY = "workspace_id, campaign_id, quarter, account_id, follow_on"
_TOTALS_KEY = "workspace_id, campaign_id, account_id, follow_on"
_WS_KEY = "workspace_id, quarter"
STRIPES = 32

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
# Only rows whose counted values changed (a claim, a timestamp, the public reply's leg move
# nothing).
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


def _read(r: str) -> str:
    """What the counts read of a dm_logs row `r`: equal for two versions of a row whose counted
    values are equal (and cheap, so that most updates, a claim among them, stop here)."""
    return (
        f"({r}.workspace_id, {r}.campaign_id, {r}.account_id, {r}.recipient_id,"
        f" {r}.created_at, {r}.trigger_kind, {r}.trigger_payload,"
        f" CASE WHEN {r}.pr_state IN ('PENDING', 'IN_FLIGHT') THEN 'unsettled'"
        f" ELSE {r}.pr_state END,"
        f" COALESCE({r}.message_kind = 'reveal' AND {r}.pr_state = 'SENT', false),"
        f" {r}.pr_evidence -> 'confirmed_by')"
    )


# One statement: the people new to a step (ON CONFLICT DO NOTHING: only a person the key has not
# seen comes back), then every slice's change (`grouped`, one row per slice), added to the
# slices, the campaign's totals and the workspace's slices, each an upsert in key order into the
# row of the connection's stripe, so that concurrent statements lock the same rows in the same
# order (the two unreferenced upserts run after the main one). A slice whose workspace is being
# deleted is left to that deletion's cascade; so are a deleted campaign's slices and totals
# (`live`), while its deliveries, now of no campaign, move within the workspace's slices.
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
_STRIPE = f"(pg_backend_pid() % {STRIPES})::smallint"


def _upsert(table: str, key: str, columns: list[str], source: str, *, grouped: bool) -> str:
    """Add `source`'s rows to `table`, in the row of the connection's stripe; `grouped`: the
    rows are one per key already (else summed by `key`, and sums of zero left out)."""
    if grouped:
        select = f"SELECT {key}, {_STRIPE}, {', '.join(columns)}\nFROM {source}\n"
    else:
        select = (
            f"SELECT {key}, {_STRIPE}, "
            + ", ".join(f"sum({name})" for name in columns)
            + f"\nFROM {source}\nGROUP BY {key}\nHAVING "
            + " OR ".join(f"sum({name}) <> 0" for name in columns)
            + "\n"
        )
    return (
        f"INSERT INTO {table} ({key}, stripe, {', '.join(columns)})\n"
        + select
        + f"ORDER BY {key}\nON CONFLICT ({key}, stripe) DO UPDATE SET "
        + ", ".join(f"{name} = {table}.{name} + excluded.{name}" for name in columns)
    )


_APPLY = (
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
    + "\n), totals AS (\n"
    + _upsert("delivery_totals", _TOTALS_KEY, _ALL, "grouped WHERE live", grouped=False)
    + "\n), workspace AS (\n"
    + _upsert("delivery_workspace_quarters", _WS_KEY, _STATE_NAMES, "grouped", grouped=False)
    + "\n)\n"
    + _upsert("delivery_counts", _KEY, _ALL, "grouped WHERE live", grouped=True)
)
_INSERTED = "WITH changed AS (" + _ROWS.format(sign=1, table="new_rows") + ")" + _APPLY
_DELETED = "WITH changed AS (" + _ROWS.format(sign=-1, table="old_rows") + ")" + _APPLY
_UPDATED = (
    "WITH old AS ("
    + _ROWS.format(sign=-1, table="old_rows")
    + "), new AS ("
    + _ROWS.format(sign=1, table="new_rows")
    + "), moved AS ("
    + _CHANGED.format(old="SELECT * FROM old", new="SELECT * FROM new")
    + "), changed AS (SELECT * FROM old WHERE id IN (SELECT id FROM moved)"
    " UNION ALL SELECT * FROM new WHERE id IN (SELECT id FROM moved))" + _APPLY
)
FUNCTION = f"""
CREATE OR REPLACE FUNCTION dm_logs_keep_counts() RETURNS trigger LANGUAGE plpgsql AS $body$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NOT EXISTS (SELECT 1 FROM new_rows) THEN
            RETURN NULL;
        END IF;
        {_INSERTED};
    ELSIF TG_OP = 'UPDATE' THEN
        IF NOT EXISTS (SELECT 1 FROM old_rows o JOIN new_rows n USING (id)
                       WHERE {_read("o")} IS DISTINCT FROM {_read("n")}) THEN
            RETURN NULL;
        END IF;
        {_UPDATED};
    ELSE
        IF NOT EXISTS (SELECT 1 FROM old_rows) THEN
            RETURN NULL;
        END IF;
        {_DELETED};
    END IF;
    RETURN NULL;
END
$body$
"""

# Each kept table's key.
_TABLES = {
    "delivery_counts": _KEY,
    "delivery_totals": _TOTALS_KEY,
    "delivery_workspace_quarters": _WS_KEY,
}
# The deliveries in flight now, by each table's key (the downgrade moves them out of pending).
_IN_FLIGHT_ROWS = (
    "SELECT r.workspace_id, r.campaign_id, r.account_id,"
    " date_bin('15 minutes', r.created_at, TIMESTAMPTZ '2000-01-01 00:00+00') AS quarter,"
    " r.trigger_kind IN ('postback', 'follow_up') AS follow_on"
    " FROM dm_logs r WHERE r.pr_state = 'IN_FLIGHT'"
)


def _skip_empty_migration() -> ModuleType:
    """Migration 0035, whose function the downgrade puts back (its text is fixed)."""
    path = Path(__file__).with_name("0035_delivery_counts_skip_empty.py")
    spec = importlib.util.spec_from_file_location("_migration_0035", path)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def upgrade() -> None:
    # No delivery may change while the columns and the function are replaced.
    op.execute("LOCK TABLE dm_logs IN SHARE ROW EXCLUSIVE MODE")
    for table in _TABLES:
        op.add_column(
            table, sa.Column("unsettled", sa.Integer(), server_default="0", nullable=False)
        )
        op.execute(
            f"UPDATE {table} SET unsettled = pending + in_flight"
            " WHERE pending <> 0 OR in_flight <> 0"
        )
        op.drop_column(table, "pending")
        op.drop_column(table, "in_flight")
    op.execute(FUNCTION)


def downgrade() -> None:
    op.execute("LOCK TABLE dm_logs IN SHARE ROW EXCLUSIVE MODE")
    for table, key in _TABLES.items():
        for name in ("pending", "in_flight"):
            op.add_column(table, sa.Column(name, sa.Integer(), server_default="0", nullable=False))
        op.execute(f"UPDATE {table} SET pending = unsettled WHERE unsettled <> 0")
        # The deliveries in flight now move from pending to in_flight, in stripe 0 of their
        # key: readers sum a key's stripes.
        op.execute(
            f"INSERT INTO {table} ({key}, stripe, pending, in_flight)"
            f" SELECT {key}, 0, -count(*), count(*) FROM ({_IN_FLIGHT_ROWS}) f"
            f" GROUP BY {key}"
            f" ON CONFLICT ({key}, stripe) DO UPDATE SET"
            f" pending = {table}.pending + excluded.pending,"
            f" in_flight = {table}.in_flight + excluded.in_flight"
        )
        op.drop_column(table, "unsettled")
    op.execute(_skip_empty_migration()._function())
