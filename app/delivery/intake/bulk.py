"""Multi-row writes as one statement with one array parameter per column (`unnest`).

`INSERT … SELECT FROM unnest(:a, :b, …)` has the same SQL text whatever the row count, so
the driver parses and prepares it once, and each row costs an array element instead of a
set of placeholders. The arrays travel in PostgreSQL's binary format through the caller's
psycopg connection (`app.db.raw`, in the caller's transaction): SQLAlchemy's
multi-`VALUES` inserts and text-format arrays were measured at several times the client CPU
per row for ingest batches. Column names and types are constants in code, never input.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from app.db.raw import Db, fetch_tuples

_encode = msgspec.json.Encoder().encode


def _json(value: Any) -> str | None:
    # msgspec: several times faster than json.dumps, and this runs once per ledger row.
    return None if value is None else _encode(value).decode()


def columns_of(
    columns: Sequence[tuple[str, str]], rows: Sequence[Mapping[str, Any]]
) -> dict[str, list[Any]]:
    """Rows → one list per column, JSON columns serialized; other values go as they are
    (plain str, int, bool, datetime or None: pass an enum's `.value`)."""
    arrays: dict[str, list[Any]] = {}
    for name, sql_type in columns:
        if sql_type == "jsonb":
            arrays[name] = [_json(row[name]) for row in rows]
        else:
            arrays[name] = [row[name] for row in rows]
    return arrays


def unnest_arrays(columns: Sequence[tuple[str, str]]) -> str:
    """`unnest(CAST(%(a)b AS t[]), …)`: binary array parameters named for the columns."""
    return "unnest(" + ", ".join(f"CAST(%({n})b AS {t}[])" for n, t in columns) + ")"


@dataclass(frozen=True, slots=True)
class BulkInsert:
    """`INSERT INTO table (columns) SELECT * FROM unnest(…) ON CONFLICT (…) DO NOTHING`."""

    table: str
    columns: tuple[tuple[str, str], ...]  # (column, PostgreSQL type)
    conflict: str
    returning: str
    sql: str = field(init=False, repr=False)

    def __post_init__(self) -> None:
        names = ", ".join(name for name, _ in self.columns)
        sql = (
            f"INSERT INTO {self.table} ({names}) SELECT * FROM {unnest_arrays(self.columns)} "  # noqa: S608 - constants
            f"ON CONFLICT ({self.conflict}) DO NOTHING RETURNING {self.returning}"
        )
        object.__setattr__(self, "sql", sql)

    async def execute(self, db: Db, rows: Sequence[Mapping[str, Any]]) -> list[tuple[Any, ...]]:
        """Insert `rows` (dicts keyed by column); returns the `RETURNING` rows of new ones."""
        return await fetch_tuples(db, self.sql, columns_of(self.columns, rows))


# The PENDING `dm_logs` rows ingest makes: a matched comment's, a DM keyword trigger's (which
# leaves the comment columns empty). A row already there (same trigger) adds nothing.
INSERT_DM_LOGS = BulkInsert(
    "dm_logs",
    (
        ("workspace_id", "bigint"),
        ("account_id", "bigint"),
        ("campaign_id", "bigint"),
        ("campaign_version", "integer"),
        ("trigger_kind", "varchar"),
        ("trigger_id", "varchar"),
        ("comment_row_id", "bigint"),
        ("media_id", "varchar"),
        ("recipient_id", "varchar"),
        ("recipient_username", "varchar"),
        ("trigger_text", "text"),
        ("matched_keyword", "varchar"),
        ("deadline_at", "timestamptz"),
        ("pr_state", "varchar"),
        ("pub_state", "varchar"),
    ),
    conflict="account_id, trigger_id",
    returning="id, account_id",
)
