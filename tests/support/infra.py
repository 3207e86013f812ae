"""Per-run isolation on the shared PostgreSQL and Redis of this machine.

Each pytest run gets its own database (a clone of a template that Alembic migrated once for
these migration files, dropped at the end) and its own Redis database number (reserved with
an expiring lock in Redis db 0), so several runs — CI, a developer, a helper — can share one
machine without seeing each other's rows, queues or heartbeats.

Templates of other migration files (another branch, an older schema) would pile up: each run
drops those no run has cloned for `TEMPLATE_KEEP_S`, never one a run is copying from (a run
holds a shared advisory lock on its template's name while it looks it up and copies it; the
drop needs that lock alone, and gives up on a template still in use).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg
import redis
from psycopg import sql
from psycopg.rows import TupleRow

ROOT = Path(__file__).resolve().parents[2]
PG_ADMIN_URL = os.environ.get("TEST_PG_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
REDIS_BASE = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379")
_LOCK_PREFIX = "oncereply:test-db-lock:"
_LOCK_TTL_S = 6 * 3600
_RESERVE_WAIT_S = 300.0


def _pg_url(db: str) -> str:
    base, _, _ = PG_ADMIN_URL.rpartition("/")
    return f"{base}/{db}"


@dataclass
class TestDatabase:
    name: str

    @property
    def url(self) -> str:
        return _pg_url(self.name)

    @classmethod
    def create(cls) -> TestDatabase:
        name = f"oncereply_test_{os.getpid()}_{secrets.token_hex(3)}"
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return cls(name)

    def migrate(self) -> None:
        """Bring this just-created, empty database to head: it becomes a clone of the template
        holding this checkout's migrations (built once by Alembic, then copied in a fraction
        of a second instead of re-running every migration in each run and bench). Then drop
        the templates of other migration files that no run has used for a while."""
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE {}").format(sql.Identifier(self.name)))
            template = template_name()
            # Held while the template is looked up and copied: no run drops it meanwhile.
            conn.execute("SELECT pg_advisory_lock_shared(%s)", (template_lock(template),))
            try:
                self._clone(conn)
                _mark_used(conn, template)
            finally:
                conn.execute("SELECT pg_advisory_unlock_shared(%s)", (template_lock(template),))
            drop_stale_templates(conn, keep=template)

    def _clone(self, conn: psycopg.Connection[TupleRow]) -> None:
        # A template dropped by hand (README) between its look-up and the clone is built
        # again once, rather than failing the run.
        for last in (False, True):
            template = migrated_template()
            try:
                conn.execute(
                    sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                        sql.Identifier(self.name), sql.Identifier(template)
                    )
                )
            except psycopg.errors.InvalidCatalogName:
                if last:
                    raise
            else:
                return

    def drop(self) -> None:
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')


def alembic_upgrade(database_url: str) -> None:
    """Migrate the database at `database_url` to head with Alembic in a subprocess."""
    env = {**os.environ, "DATABASE_URL": database_url, "ONCEREPLY_ENV_FILE": ""}
    result = subprocess.run(
        [sys.executable, "-m", "alembic", "upgrade", "head"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"alembic upgrade failed:\n{result.stdout}\n{result.stderr}")


def _migrations_digest() -> str:
    """What decides the schema: every file Alembic reads to upgrade (its env.py imports the
    models only for autogenerate, which an upgrade does not use)."""
    digest = hashlib.sha256()
    files = [ROOT / "alembic.ini", *sorted((ROOT / "migrations").rglob("*.py"))]
    for path in files:
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


_TEMPLATE_PREFIX = "oncereply_template_"
# A template no run has cloned for this long belongs to migration files no longer in use here
# (a branch left, a schema changed): dropped by the next run of other migration files.
TEMPLATE_KEEP_S = 24 * 3600
_USED_NOTE = "oncereply test template, last cloned at "


def template_name() -> str:
    """The template database of this checkout's migration files."""
    return f"{_TEMPLATE_PREFIX}{_migrations_digest()}"


def template_lock(name: str) -> int:
    """The advisory lock key of a template (a signed 64-bit number from its name)."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


def _mark_used(conn: psycopg.Connection[TupleRow], name: str) -> None:
    """Note on the template when a run last cloned it (a database comment: PostgreSQL keeps
    no such time itself)."""
    # Dropped meanwhile: nothing to note.
    with contextlib.suppress(psycopg.errors.InvalidCatalogName):
        conn.execute(
            sql.SQL("COMMENT ON DATABASE {} IS {}").format(
                sql.Identifier(name), sql.Literal(f"{_USED_NOTE}{int(time.time())}")
            )
        )


def drop_stale_templates(conn: psycopg.Connection[TupleRow], *, keep: str) -> list[str]:
    """Drop the finished templates other than `keep` that no run has cloned for
    `TEMPLATE_KEEP_S` and none is copying from now; the names dropped. A template with no note
    of its last use (made before runs noted it) is noted as used now, so it is kept that long
    from here."""
    found = conn.execute(
        "SELECT datname, shobj_description(oid, 'pg_database') FROM pg_database "
        "WHERE starts_with(datname, %s) AND datname NOT LIKE %s AND datname <> %s",
        (_TEMPLATE_PREFIX, r"%\_build\_%", keep),
    ).fetchall()
    dropped = []
    for name, note in found:
        used_at = _last_used(note)
        if used_at is None:
            _mark_used(conn, name)
            continue
        if used_at > time.time() - TEMPLATE_KEEP_S:
            continue
        lock = template_lock(name)
        # Taken only when no run holds it shared: none is looking it up or copying it.
        taken = conn.execute("SELECT pg_try_advisory_lock(%s)", (lock,)).fetchone()
        if taken is None or not taken[0]:
            continue
        try:
            # A run of code older than this lock may still be copying it: give up rather
            # than wait, and never force its sessions out.
            conn.execute("SET lock_timeout = '2s'")
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
            dropped.append(name)
        except (psycopg.errors.ObjectInUse, psycopg.errors.LockNotAvailable):
            pass
        finally:
            conn.execute("RESET lock_timeout")
            conn.execute("SELECT pg_advisory_unlock(%s)", (lock,))
    return dropped


def _last_used(note: str | None) -> float | None:
    if not note or not note.startswith(_USED_NOTE):
        return None
    try:
        return float(note.removeprefix(_USED_NOTE))
    except ValueError:
        return None


def migrated_template() -> str:
    """The name of a database at head for these exact migration files, built when absent.

    A build migrates a database of its own and renames it into place, so concurrent runs
    never clone a half-migrated template: when two build at once, one rename wins and the
    other drops its copy. A changed migration file means a new name, never a stale schema.
    """
    name = template_name()
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            return name
        build = f"{name}_build_{os.getpid()}_{secrets.token_hex(3)}"
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(build)))
        try:
            alembic_upgrade(_pg_url(build))
            # A clone fails while any session is in its template: let none in, not even a
            # psql someone opens to look (dropping it still works).
            conn.execute(
                sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS false").format(sql.Identifier(build))
            )
            _rename_when_free(conn, build, name)
        except psycopg.errors.DuplicateDatabase:
            pass
        finally:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(build))
            )
    return name


def _rename_when_free(conn: psycopg.Connection[TupleRow], old: str, new: str) -> None:
    # Alembic's connections end with its process, but their server backends may still be
    # leaving the database for a moment: a rename needs it to have no sessions.
    deadline = time.monotonic() + 30
    while True:
        try:
            conn.execute(
                sql.SQL("ALTER DATABASE {} RENAME TO {}").format(
                    sql.Identifier(old), sql.Identifier(new)
                )
            )
        except psycopg.errors.ObjectInUse:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
        else:
            return


@dataclass
class TestRedis:
    db: int
    token: str

    @property
    def url(self) -> str:
        return f"{REDIS_BASE}/{self.db}"

    @classmethod
    def reserve(cls) -> TestRedis:
        token = f"{os.getpid()}:{secrets.token_hex(4)}"
        client = redis.Redis.from_url(f"{REDIS_BASE}/0")
        try:
            # `make test` holds three at once (one per lane), so a few runs on one machine
            # can take all fifteen for a while: wait for one to end rather than fail.
            deadline = time.monotonic() + _RESERVE_WAIT_S
            while time.monotonic() < deadline:
                for db in range(1, 16):
                    if client.set(f"{_LOCK_PREFIX}{db}", token, nx=True, ex=_LOCK_TTL_S):
                        reserved = cls(db, token)
                        reserved.flush()
                        return reserved
                time.sleep(0.5)
        finally:
            client.close()
        raise RuntimeError(
            f"all 15 Redis test databases were taken by other test runs for {_RESERVE_WAIT_S:g} s"
        )

    def flush(self) -> None:
        client = redis.Redis.from_url(self.url)
        try:
            client.flushdb()
        finally:
            client.close()

    def release(self) -> None:
        self.flush()
        client = redis.Redis.from_url(f"{REDIS_BASE}/0")
        try:
            if client.get(f"{_LOCK_PREFIX}{self.db}") == self.token.encode():
                client.delete(f"{_LOCK_PREFIX}{self.db}")
        finally:
            client.close()


TEST_SECRET_KEY = "test-secret-key-0123456789abcdef0123456789abcdef"


def base_env(database_url: str, redis_url: str) -> dict[str, str]:
    """The settings every test process runs with; secrets are fixed test values. Each run's
    processes share a click spool of their own, next to no other run's database."""
    run = database_url.rpartition("/")[2]
    return {
        "ONCEREPLY_ENV_FILE": "",
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_url,
        "SECRET_KEY": TEST_SECRET_KEY,
        "ENCRYPTION_KEY": "11" * 32,
        "INSTAGRAM_APP_ID": "990602627938098",
        "INSTAGRAM_APP_SECRET": "test-instagram-app-secret",
        "META_APP_SECRET": "test-meta-app-secret",
        "WEBHOOK_VERIFY_TOKEN": "test-verify-token",
        "PUBLIC_BASE_URL": "http://127.0.0.1:8000",
        "LOG_LEVEL": "WARNING",
        "CLICK_SPOOL_DIR": str(ROOT / "var" / "test-clicks" / run),
    }


def truncate_all(database_url: str) -> None:
    """Empty every table of ours (not Alembic's) and restart every sequence, in one transaction.

    Rows go with DELETE, not TRUNCATE: TRUNCATE gives each of the ~30 tables and ~90 indexes a
    new file even when it is empty, 0.5-1 s per test on a busy machine, while a test leaves a
    few rows. Every row of every table goes, so foreign keys and the count-keeping triggers are
    off for the transaction (`session_replication_role = replica`): nothing can dangle, and the
    kept-count tables are emptied like the rest.
    """
    with psycopg.connect(database_url, autocommit=True) as conn:
        tables = [
            row[0]
            for row in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
                "AND tablename <> 'alembic_version'"
            )
        ]
        deletes = [sql.SQL("DELETE FROM {}").format(sql.Identifier(table)) for table in tables]
        restart = sql.SQL(
            "SELECT setval(s.seqrelid, s.seqstart, false) FROM pg_sequence s"
            " JOIN pg_class c ON c.oid = s.seqrelid"
            " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public'"
        )
        with conn.transaction():
            conn.execute(
                sql.SQL("; ").join(
                    [sql.SQL("SET LOCAL session_replication_role = replica"), *deletes, restart]
                )
            )
