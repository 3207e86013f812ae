"""Plain psycopg statements on a session's connection, inside the session's transaction.

For hot paths where SQLAlchemy's statement compilation and result processing cost more than
the query (measured in ingest: a two-table select took ~2 ms of CPU through the ORM session,
~0.4 ms this way). Parameters use psycopg's placeholders: `%(name)s`, or `%(name)b` for
PostgreSQL's binary format (arrays especially). SQL text must be constant; values only ever
travel as parameters.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from psycopg.rows import dict_row
from sqlalchemy.ext.asyncio import AsyncSession


async def _driver(session: AsyncSession) -> Any:
    connection = await session.connection()
    raw = await connection.get_raw_connection()
    return raw.driver_connection


async def fetch_tuples(
    session: AsyncSession, sql: str, params: Mapping[str, Any]
) -> list[tuple[Any, ...]]:
    """Run `sql`; its rows as tuples (none for a statement without a result)."""
    cursor = await (await _driver(session)).execute(sql, params)
    rows: list[tuple[Any, ...]] = await cursor.fetchall() if cursor.description else []
    return rows


async def fetch_dicts(
    session: AsyncSession, sql: str, params: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """Run `sql`; its rows as dicts keyed by column name."""
    cursor = (await _driver(session)).cursor(row_factory=dict_row)
    await cursor.execute(sql, params)
    rows: list[dict[str, Any]] = await cursor.fetchall()
    return rows
