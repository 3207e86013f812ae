"""delivery_counts, funnel_people: delivery counts kept by a trigger on dm_logs, filled here
from the deliveries already recorded

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-02
"""

# ruff: noqa: S608 - the SQL is composed from this file's constants; it takes no values

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0023"
down_revision: str | None = "0022"
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
# seen comes back), then every slice's change, one upsert row per slice in key order, so that
# concurrent statements lock the same rows in the same order. A slice whose workspace or
# campaign is being deleted is left to that deletion's cascade.
_APPLY = (
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
    FROM people p JOIN changed c ON c.id = p.first_log_id AND c.sign = 1
)
INSERT INTO delivery_counts ("""
    + _KEY
    + ", "
    + ", ".join(name for name, _ in _COUNTED)
    + ", "
    + ", ".join(_PEOPLE)
    + ")\nSELECT "
    + _KEY
    + ", "
    + ", ".join(f"sum({name})" for name, _ in _COUNTED)
    + ", "
    + ", ".join(f"sum({name})" for name in _PEOPLE)
    + """
FROM deltas d
WHERE EXISTS (SELECT 1 FROM workspaces w WHERE w.id = d.workspace_id)
  AND (d.campaign_id IS NULL OR EXISTS (SELECT 1 FROM campaigns k WHERE k.id = d.campaign_id))
GROUP BY """
    + _KEY
    + "\nHAVING "
    + " OR ".join(f"sum({name}) <> 0" for name, _ in _COUNTED)
    + " OR "
    + " OR ".join(f"sum({name}) <> 0" for name in _PEOPLE)
    + "\nORDER BY "
    + _KEY
    + "\nON CONFLICT ("
    + _KEY
    + ") DO UPDATE SET "
    + ", ".join(
        f"{name} = delivery_counts.{name} + excluded.{name}"
        for name in [n for n, _ in _COUNTED] + list(_PEOPLE)
    )
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
_FUNCTION = f"""
CREATE FUNCTION dm_logs_keep_counts() RETURNS trigger LANGUAGE plpgsql AS $body$
BEGIN
    IF TG_OP = 'INSERT' THEN
        {_INSERTED};
    ELSIF TG_OP = 'UPDATE' THEN
        {_UPDATED};
    ELSE
        {_DELETED};
    END IF;
    RETURN NULL;
END
$body$
"""
_TRIGGERS = (
    "CREATE TRIGGER dm_logs_counts_insert AFTER INSERT ON dm_logs"
    " REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION dm_logs_keep_counts()",
    "CREATE TRIGGER dm_logs_counts_update AFTER UPDATE ON dm_logs"
    " REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows"
    " FOR EACH STATEMENT EXECUTE FUNCTION dm_logs_keep_counts()",
    "CREATE TRIGGER dm_logs_counts_delete AFTER DELETE ON dm_logs"
    " REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION dm_logs_keep_counts()",
)
# The deliveries already there, through the same statement the trigger runs on an insert.
_FILL = "WITH changed AS (" + _ROWS.format(sign=1, table="dm_logs") + ")" + _APPLY


def upgrade() -> None:
    op.create_table(
        "delivery_counts",
        sa.Column("workspace_id", sa.BigInteger(), nullable=False),
        sa.Column("campaign_id", sa.BigInteger(), nullable=True),
        sa.Column("quarter", sa.DateTime(timezone=True), nullable=False),
        sa.Column("account_id", sa.BigInteger(), nullable=False),
        sa.Column("follow_on", sa.Boolean(), nullable=False),
        *(
            sa.Column(name, sa.Integer(), server_default="0", nullable=False)
            for name in [n for n, _ in _COUNTED] + list(_PEOPLE)
        ),
        sa.ForeignKeyConstraint(
            ["campaign_id"],
            ["campaigns.id"],
            name=op.f("fk_delivery_counts_campaign_id_campaigns"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["workspace_id"],
            ["workspaces.id"],
            name=op.f("fk_delivery_counts_workspace_id_workspaces"),
            ondelete="CASCADE",
        ),
    )
    op.create_index(
        "uq_delivery_counts_key",
        "delivery_counts",
        ["workspace_id", "campaign_id", "quarter", "account_id", "follow_on"],
        unique=True,
        postgresql_nulls_not_distinct=True,
    )
    op.create_index("ix_delivery_counts_ws_quarter", "delivery_counts", ["workspace_id", "quarter"])
    op.create_table(
        "funnel_people",
        sa.Column("campaign_id", sa.BigInteger(), nullable=False),
        sa.Column("step", sa.String(length=8), nullable=False),
        sa.Column("recipient_id", sa.String(length=32), nullable=False),
        sa.Column("first_log_id", sa.BigInteger(), nullable=False),
        sa.Column("first_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["campaign_id"],
            ["campaigns.id"],
            name=op.f("fk_funnel_people_campaign_id_campaigns"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "campaign_id", "step", "recipient_id", name=op.f("pk_funnel_people")
        ),
    )
    # No delivery may change between the fill and the trigger taking over.
    op.execute("LOCK TABLE dm_logs IN SHARE ROW EXCLUSIVE MODE")
    op.execute(_FILL)
    op.execute(_FUNCTION)
    for trigger in _TRIGGERS:
        op.execute(trigger)


def downgrade() -> None:
    for name in ("dm_logs_counts_insert", "dm_logs_counts_update", "dm_logs_counts_delete"):
        op.execute(f"DROP TRIGGER {name} ON dm_logs")
    op.execute("DROP FUNCTION dm_logs_keep_counts()")
    op.drop_table("funnel_people")
    op.drop_index("ix_delivery_counts_ws_quarter", table_name="delivery_counts")
    op.drop_index("uq_delivery_counts_key", table_name="delivery_counts")
    op.drop_table("delivery_counts")
