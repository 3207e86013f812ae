"""Alembic environment: runs migrations synchronously over psycopg with `DATABASE_URL`.

psycopg 3 speaks both sync and async, so the same URL serves the app (async) and this
script (sync), and migrations never need an event loop of their own.
"""

from __future__ import annotations

import logging

from alembic import context
from sqlalchemy import create_engine, pool, text

from app.db.models import Base
from app.settings import SettingsError, database_url_from_env

config = context.config
logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")


def _url() -> str:
    # Tests and tools may pass a URL explicitly; otherwise it comes from the environment.
    explicit = config.get_main_option("sqlalchemy.url")
    if explicit:
        return explicit
    try:
        return database_url_from_env()
    except SettingsError as exc:
        raise SystemExit(f"oncereply: {exc}") from None


def run_migrations_offline() -> None:
    context.configure(
        url=_url(),
        target_metadata=Base.metadata,
        literal_binds=True,
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


# Several containers may start at once and each run `upgrade head`; a session advisory lock
# makes them take turns, and the later ones find nothing left to do.
_MIGRATION_LOCK = 7_321_843_001


def run_migrations_online() -> None:
    engine = create_engine(_url(), poolclass=pool.NullPool)
    with engine.connect() as connection:
        connection.execute(text("SELECT pg_advisory_lock(:key)"), {"key": _MIGRATION_LOCK})
        connection.commit()
        try:
            context.configure(
                connection=connection, target_metadata=Base.metadata, compare_type=True
            )
            with context.begin_transaction():
                context.run_migrations()
        finally:
            connection.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": _MIGRATION_LOCK})
            connection.commit()
    engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
