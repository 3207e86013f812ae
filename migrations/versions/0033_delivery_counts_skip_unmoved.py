"""dm_logs_keep_counts: an update that changes no column a count reads returns at once

Every delivery updates its row three times (the claim, the note that the request is leaving,
the outcome), and the note changes no counted column, nor do recovery's stamps; each still
ran the whole counting statement over its transition tables (both rows' counted values
computed, compared, and the upserts planned and run over nothing). A column list on the
trigger would skip it, but PostgreSQL refuses column lists on triggers with transition
tables, so the function first compares the raw columns the counts are computed from
(`_READ`): when no row changed any of them, nothing can have moved. When one did, the counting
statement runs as before and still counts only the rows whose counted values moved.

Backend CPU per delivery of the claim, note and outcome statements on one connection,
alternating the two functions (four pairs, a machine at load ~15): 3.49 -> 2.94 ms median.

Revision ID: 0033
Revises: 0032
Create Date: 2026-12-02
"""

# ruff: noqa: S608 - the SQL is composed from this file's constants; it takes no values

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from alembic import op

revision: str = "0033"
down_revision: str | None = "0032"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The columns migration 0029's counting statement computes its counted values from.
_READ = (
    "workspace_id",
    "campaign_id",
    "account_id",
    "recipient_id",
    "created_at",
    "trigger_kind",
    "trigger_payload",
    "pr_state",
    "message_kind",
    "pr_evidence",
)
_UPDATE_BRANCH = "    ELSIF TG_OP = 'UPDATE' THEN\n"
_UNMOVED_RETURN = (
    _UPDATE_BRANCH
    + "        IF NOT EXISTS (SELECT 1 FROM old_rows o JOIN new_rows n USING (id) WHERE ("
    + ", ".join(f"o.{c}" for c in _READ)
    + ") IS DISTINCT FROM ("
    + ", ".join(f"n.{c}" for c in _READ)
    + ")) THEN\n            RETURN NULL;\n        END IF;\n"
)


def _stripes_migration() -> ModuleType:
    """Migration 0029, whose function this one extends (its text is fixed, as a migration's is)."""
    path = Path(__file__).with_name("0029_delivery_count_stripes.py")
    spec = importlib.util.spec_from_file_location("_migration_0029", path)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _function() -> str:
    striped: str = _stripes_migration()._function(striped=True)
    if striped.count(_UPDATE_BRANCH) != 1:
        raise RuntimeError("migration 0029's function has no single UPDATE branch to extend")
    return striped.replace(_UPDATE_BRANCH, _UNMOVED_RETURN)


def upgrade() -> None:
    op.execute(_function())


def downgrade() -> None:
    op.execute(_stripes_migration()._function(striped=True))
