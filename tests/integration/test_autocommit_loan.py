"""`autocommit` lends a pooled connection in the driver's autocommit mode and gives it back as
it was lent, or not at all: the next borrower of that connection, a session, must get
transactions again, not a connection that commits every statement by itself."""

from __future__ import annotations

from sqlalchemy import text

from app.db.engine import autocommit, create_engine
from app.db.raw import driver_of
from app.settings import Settings


async def test_each_statement_commits_and_the_pool_gets_a_transactional_connection_back(
    settings: Settings,
) -> None:
    engine = create_engine(settings.database_url, pool_size=1, max_overflow=0)
    try:
        async with autocommit(engine) as conn:
            await conn.execute(text("CREATE TEMP TABLE loan_probe (n int)"))
            await conn.execute(text("INSERT INTO loan_probe VALUES (1)"))
            lent = await driver_of(conn)
            assert lent.autocommit
        # The pool's only connection, borrowed the ordinary way: a rollback undoes.
        async with engine.connect() as conn:
            assert await driver_of(conn) is lent
            assert not lent.autocommit
            await conn.execute(text("INSERT INTO loan_probe VALUES (2)"))
            await conn.rollback()
            rows = (await conn.execute(text("SELECT n FROM loan_probe"))).scalars().all()
        assert rows == [1], "the loan's insert committed by itself; the session's rolled back"
    finally:
        await engine.dispose()


async def test_a_loan_left_inside_a_transaction_is_not_put_back(settings: Settings) -> None:
    engine = create_engine(settings.database_url, pool_size=1, max_overflow=0)
    try:
        async with autocommit(engine) as conn:
            lent = await driver_of(conn)
            await lent.execute("BEGIN")
            await lent.execute("CREATE TEMP TABLE loan_probe (n int)")
        async with engine.connect() as conn:
            fresh = await driver_of(conn)
            assert fresh is not lent, "a connection left mid-transaction was pooled again"
            assert not fresh.autocommit
            assert lent.closed
            missing = await conn.execute(text("SELECT to_regclass('pg_temp.loan_probe')"))
            assert missing.scalar() is None
    finally:
        await engine.dispose()
