"""dm_logs: when a private reply's request left (pr_requested_at), and one row per message id

`pr_requested_at` is written by the claim's holder just before the request to Meta leaves; a
claim abandoned while it is NULL sent nothing, so the stale-claim sweep gives it back to
PENDING instead of UNCONFIRMED. Legs that may already be mid-send when this runs (IN_FLIGHT)
or were left uncertain (UNCONFIRMED) are taken to have sent their request: the old code wrote
no marker, and the safe reading is "it may have left".

The partial unique index makes a message id confirm at most one delivery per account. Rows
that an earlier inbox check credited with a message another row already holds lose that
credit first (the row whose send Meta answered directly keeps it, else the oldest): they go
back to UNCONFIRMED, noted in their evidence.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_WITHDRAW_DOUBLE_CREDITS = """
WITH ranked AS (
    SELECT id, row_number() OVER (
        PARTITION BY account_id, pr_message_id
        ORDER BY (pr_evidence ->> 'confirmed_by' = 'conversations_api') NULLS FIRST, id
    ) AS n
    FROM dm_logs WHERE pr_message_id IS NOT NULL
)
UPDATE dm_logs d SET
    pr_state = 'UNCONFIRMED',
    pr_message_id = NULL,
    pr_sent_at = NULL,
    pr_evidence = (COALESCE(d.pr_evidence, '{}'::jsonb)
        - 'confirmed_by' - 'confirmed_at' - 'message_id' - 'created_time' - 'matched_on')
        || jsonb_build_object('inbox_check', jsonb_build_object(
            'checked_at', now(), 'result', 'not_found',
            'detail', 'the message once found for this DM belongs to another delivery')),
    updated_at = now()
FROM ranked r WHERE d.id = r.id AND r.n > 1
"""


def upgrade() -> None:
    op.add_column(
        "dm_logs", sa.Column("pr_requested_at", sa.DateTime(timezone=True), nullable=True)
    )
    op.execute(
        "UPDATE dm_logs SET pr_requested_at = COALESCE(pr_claimed_at, created_at) "
        "WHERE pr_state IN ('IN_FLIGHT', 'UNCONFIRMED')"
    )
    op.execute(_WITHDRAW_DOUBLE_CREDITS)
    op.create_index(
        "uq_dm_logs_account_pr_message",
        "dm_logs",
        ["account_id", "pr_message_id"],
        unique=True,
        postgresql_where=sa.text("pr_message_id IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index(
        "uq_dm_logs_account_pr_message",
        table_name="dm_logs",
        postgresql_where=sa.text("pr_message_id IS NOT NULL"),
    )
    op.drop_column("dm_logs", "pr_requested_at")
