"""Plain psycopg statements for hot paths, on a pooled connection or a session's.

For code where SQLAlchemy's statement compilation and result processing cost more than the
query (measured in ingest: a two-table select took ~2 ms of CPU through the ORM session,
~0.4 ms this way). Parameters use psycopg's placeholders: `%(name)s`, or `%(name)b` for
PostgreSQL's binary format (arrays especially). SQL text must be constant; values only ever
travel as parameters.

`Db` is a psycopg `AsyncConnection`: `db_of(session)` gives the one under an `AsyncSession`
(statements then run inside the session's transaction), `driver_of(conn)` the one under a
SQLAlchemy connection (on an autocommit one, each statement is its own transaction);
`pipelined_transaction(engine)` gives a pooled one in pipeline mode inside a transaction, so
`BEGIN` travels with the first query and statements whose results nobody waits for travel
with `COMMIT` — on a machine where a round trip costs as much CPU as the statement, that
halves the trips of a short transaction.

The delivery statements are written with SQLAlchemy's `:name` parameters, as every other
statement of the engine is, and run through the driver (`psycopg_sql` turns them into psycopg's
placeholders once, at import): a delivery's four statements then skip SQLAlchemy's execution
and result layers (measured: ~0.2 ms of CPU a statement with 32 concurrent deliveries).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any, TypeAlias

import psycopg
from psycopg import AsyncConnection
from psycopg.rows import dict_row
from sqlalchemy.ext.asyncio import AsyncConnection as SqlConnection
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

Db: TypeAlias = AsyncConnection[Any]
# What a statement run through the driver raises (a dropped connection included): psycopg's
# own errors, which SQLAlchemy, bypassed, does not wrap in its `DBAPIError`.
DriverError = psycopg.Error

# SQLAlchemy's own pattern for a `:name` parameter of `text()` (not `::type`, not `\:`).
_BIND = re.compile(r"(?<![:\w\\]):(\w+)(?!:)")


# psycopg keeps a statement's parsed form only up to this length (its
# `_queries.MAX_CACHED_STATEMENT_LENGTH`); a longer one is parsed again on every execution.
PSYCOPG_CACHED_LENGTH = 4096


def psycopg_sql(sql: str) -> str:
    """`sql` written with `:name` parameters, with psycopg's `%(name)s` instead, each line
    without its indentation. Refused when psycopg would not keep its parsed form."""
    if "%" in sql:
        raise ValueError("a literal % would need escaping for psycopg; keep it out of the SQL")
    lines = [line.strip() for line in sql.strip().splitlines()]
    if any(line.count("'") % 2 for line in lines):
        raise ValueError("a string literal spans lines; its indentation would be lost")
    converted = _BIND.sub(r"%(\1)s", "\n".join(lines))
    if len(converted.encode()) > PSYCOPG_CACHED_LENGTH:
        raise ValueError(
            f"{len(converted.encode())} bytes: psycopg parses a statement longer than "
            f"{PSYCOPG_CACHED_LENGTH} again on every execution"
        )
    return converted


async def driver_of(conn: SqlConnection) -> Db:
    """The psycopg connection under a SQLAlchemy connection."""
    raw = await conn.get_raw_connection()
    driver: Db = raw.driver_connection  # type: ignore[assignment]
    return driver


async def fetch_one(db: Db, sql: str, params: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """The first row of a statement (a query, or a write with `RETURNING`), if any."""
    cursor = await db.execute(sql, params)
    row: tuple[Any, ...] | None = await cursor.fetchone()
    return row


async def fetch_one_dict(db: Db, sql: str, params: Mapping[str, Any]) -> dict[str, Any] | None:
    """Like `fetch_one`, the row as a dict keyed by column name."""
    cursor = db.cursor(row_factory=dict_row)
    await cursor.execute(sql, params)
    row: dict[str, Any] | None = await cursor.fetchone()
    return row


async def db_of(session: AsyncSession) -> Db:
    """The psycopg connection under `session`, inside its transaction."""
    connection = await session.connection()
    raw = await connection.get_raw_connection()
    driver: Db = raw.driver_connection  # type: ignore[assignment]
    return driver


@asynccontextmanager
async def pipelined_transaction(engine: AsyncEngine) -> AsyncIterator[Db]:
    """A pooled connection in pipeline mode and a transaction, committed on a clean exit."""
    async with engine.connect() as connection:
        raw = await connection.get_raw_connection()
        driver: Db = raw.driver_connection  # type: ignore[assignment]
        async with driver.pipeline(), driver.transaction():
            yield driver


async def fetch_tuples(db: Db, sql: str, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    """Run a statement that returns rows (a query, or a write with `RETURNING`)."""
    cursor = await db.execute(sql, params)
    rows: list[tuple[Any, ...]] = await cursor.fetchall()
    return rows


async def fetch_dicts(db: Db, sql: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Like `fetch_tuples`, rows as dicts keyed by column name."""
    cursor = db.cursor(row_factory=dict_row)
    await cursor.execute(sql, params)
    rows: list[dict[str, Any]] = await cursor.fetchall()
    return rows


async def execute(db: Db, sql: str, params: Mapping[str, Any]) -> None:
    """Send a statement without waiting for it (in pipeline mode it goes with the next sync)."""
    await db.execute(sql, params)
