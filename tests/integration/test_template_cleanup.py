"""Test runs drop the template databases of other migration files that no run uses any more
(`tests/support/infra.py`), and never one a run is copying from or used lately."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql

from tests.support import infra


@pytest.fixture
def admin() -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    with psycopg.connect(infra.PG_ADMIN_URL, autocommit=True) as conn:
        yield conn


@pytest.fixture
def made(admin: psycopg.Connection[tuple[object, ...]]) -> Iterator[list[str]]:
    """Template databases of made-up migration files, dropped at the end whatever happened."""
    names: list[str] = []
    yield names
    for name in names:
        admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def _template(
    admin: psycopg.Connection[tuple[object, ...]],
    made: list[str],
    *,
    used_s_ago: float | None,
    connections: bool = False,
) -> str:
    """A template as a run builds it (no connections allowed), last cloned `used_s_ago`
    (None: never noted)."""
    name = f"oncereply_template_{secrets.token_hex(8)}"
    made.append(name)
    admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    if not connections:
        admin.execute(
            sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS false").format(sql.Identifier(name))
        )
    if used_s_ago is not None:
        note = f"oncereply test template, last cloned at {int(time.time() - used_s_ago)}"
        admin.execute(
            sql.SQL("COMMENT ON DATABASE {} IS {}").format(sql.Identifier(name), sql.Literal(note))
        )
    return name


def _exists(admin: psycopg.Connection[tuple[object, ...]], name: str) -> bool:
    found = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
    return found is not None


def test_a_run_drops_the_templates_no_run_has_cloned_lately(
    admin: psycopg.Connection[tuple[object, ...]], made: list[str]
) -> None:
    stale = _template(admin, made, used_s_ago=infra.TEMPLATE_KEEP_S + 60)
    recent = _template(admin, made, used_s_ago=60)
    database = infra.TestDatabase.create()
    try:
        database.migrate()
        assert _exists(admin, database.name)
    finally:
        database.drop()
    assert not _exists(admin, stale), "a template no run had cloned for a day was kept"
    assert _exists(admin, recent), "a template cloned a minute ago was dropped"
    # This run's own template is kept, and noted as just cloned.
    current = infra.template_name()
    assert _exists(admin, current)
    note = admin.execute(
        "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s",
        (current,),
    ).fetchone()
    assert note is not None
    assert str(note[0]).startswith("oncereply test template, last cloned at ")


def test_a_template_in_use_or_never_noted_is_kept(
    admin: psycopg.Connection[tuple[object, ...]], made: list[str]
) -> None:
    keep = infra.template_name()
    old = infra.TEMPLATE_KEEP_S + 60
    copying = _template(admin, made, used_s_ago=old)
    connected = _template(admin, made, used_s_ago=old, connections=True)
    unnoted = _template(admin, made, used_s_ago=None)
    building = f"oncereply_template_{secrets.token_hex(8)}_build_1_abcdef"
    made.append(building)
    admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(building)))
    with (
        psycopg.connect(infra.PG_ADMIN_URL, autocommit=True) as run,
        # A run of code older than the lock, its session still in the template.
        psycopg.connect(infra._pg_url(connected), autocommit=True),
    ):
        # A run looking the template up or copying it holds its lock shared.
        run.execute("SELECT pg_advisory_lock_shared(%s)", (infra.template_lock(copying),))
        dropped = infra.drop_stale_templates(admin, keep=keep)
        # The copy is over (its lock given back at once; a closed session's goes later).
        run.execute("SELECT pg_advisory_unlock_shared(%s)", (infra.template_lock(copying),))
    assert not set(dropped) & {copying, connected, unnoted, building, keep}, dropped
    for name in (copying, connected, unnoted, building):
        assert _exists(admin, name), name
    # Once no run copies from it, an old one goes; one made before runs noted their clones
    # is kept a day from the first look.
    again = infra.drop_stale_templates(admin, keep=keep)
    assert copying in again
    assert not _exists(admin, copying)
    assert unnoted not in again
    assert _exists(admin, unnoted)
