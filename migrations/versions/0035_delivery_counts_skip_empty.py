"""dm_logs_keep_counts: an insert or delete of no rows returns at once

A statement-level trigger fires even when its statement wrote no row, and every recorded
outcome runs one: the outcome statement's follow-up CTE (`app.delivery.content.follow_ups`)
is an `INSERT INTO dm_logs ... WHERE :fu_text IS NOT NULL`, which inserts nothing for all but a
tap's reveal. Each such firing still set up and ran the whole counting statement over an empty
transition table. Now the INSERT and DELETE branches first look for a row (the UPDATE branch
already returns when no row changed a counted column, migration 0033).

The same empty `INSERT INTO dm_logs ... SELECT ... WHERE false` on one connection, 2,000 times,
alternating the two functions: backend CPU 0.165-0.19 -> 0.025-0.08 ms per statement.

Revision ID: 0035
Revises: 0034
Create Date: 2026-12-02
"""

# ruff: noqa: S608 - the SQL is composed from this file's constants; it takes no values

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from alembic import op

revision: str = "0035"
down_revision: str | None = "0034"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Each branch of the function, and the transition table it reads.
_GUARDS = {
    "    IF TG_OP = 'INSERT' THEN\n": "new_rows",
    "    ELSE\n": "old_rows",
}


def _skip_unmoved_migration() -> ModuleType:
    """Migration 0033, whose function this one extends (its text is fixed, as a migration's is)."""
    path = Path(__file__).with_name("0033_delivery_counts_skip_unmoved.py")
    spec = importlib.util.spec_from_file_location("_migration_0033", path)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _function() -> str:
    function: str = _skip_unmoved_migration()._function()
    for branch, table in _GUARDS.items():
        if function.count(branch) != 1:
            raise RuntimeError(f"migration 0033's function has no single {branch.strip()!r}")
        function = function.replace(
            branch,
            f"{branch}        IF NOT EXISTS (SELECT 1 FROM {table}) THEN\n"
            "            RETURN NULL;\n        END IF;\n",
        )
    return function


def upgrade() -> None:
    op.execute(_function())


def downgrade() -> None:
    op.execute(_skip_unmoved_migration()._function())
