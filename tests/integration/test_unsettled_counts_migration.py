"""Migration 0037 (deliveries waiting or being sent counted in one column) keeps every count
both ways, on a database of its own: down to 0036 each key's PENDING and IN_FLIGHT come apart
as the rows say (in whatever stripes they were counted), and the trigger 0036 had keeps them;
up again the kept counts agree with a recount of the rows."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from app.db.engine import create_engine
from app.db.models import LegState, TriggerKind
from app.jobs.registry import JOB_OPTIONS
from app.resources import Resources
from app.settings import load_settings
from tests.support import infra
from tests.support.kept_counts import kept_count_differences
from tests.support.log_data import add_logs, log_values, signed_in_creator

_SLICE = "date_bin('15 minutes', created_at, TIMESTAMPTZ '2000-01-01 00:00+00')"
_FOLLOW_ON = "trigger_kind IN ('postback', 'follow_up')"
# Each kept table, its key, and the same key of a dm_logs row.
_KEYS = {
    "delivery_counts": (
        "workspace_id, campaign_id, quarter, account_id, follow_on",
        f"workspace_id, campaign_id, {_SLICE}, account_id, {_FOLLOW_ON}",
    ),
    "delivery_totals": (
        "workspace_id, campaign_id, account_id, follow_on",
        f"workspace_id, campaign_id, account_id, {_FOLLOW_ON}",
    ),
    "delivery_workspace_quarters": ("workspace_id, quarter", f"workspace_id, {_SLICE}"),
}


@pytest.fixture
def scratch() -> Iterator[infra.TestDatabase]:
    database = infra.TestDatabase.create()
    try:
        database.migrate()
        yield database
    finally:
        database.drop()


def _alembic(database_url: str, *command: str) -> None:
    env = {**os.environ, "DATABASE_URL": database_url, "ONCEREPLY_ENV_FILE": ""}
    result = subprocess.run(
        [sys.executable, "-m", "alembic", *command],
        cwd=infra.ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def _split(conn: psycopg.Connection[Any]) -> dict[str, tuple[set[Any], set[Any]]]:
    """Per table: its keys' (pending, in flight) as kept, and as a recount of the rows."""
    found = {}
    for table, (key, row_key) in _KEYS.items():
        kept = conn.execute(
            f"SELECT {key}, sum(pending), sum(in_flight) FROM {table} GROUP BY {key}"  # noqa: S608
            " HAVING sum(pending) <> 0 OR sum(in_flight) <> 0"
        ).fetchall()
        rows = conn.execute(
            f"SELECT {row_key}, count(*) FILTER (WHERE pr_state = 'PENDING'),"  # noqa: S608
            " count(*) FILTER (WHERE pr_state = 'IN_FLIGHT') FROM dm_logs"
            f" WHERE pr_state IN ('PENDING', 'IN_FLIGHT') GROUP BY {row_key}"
        ).fetchall()
        found[table] = (set(kept), set(rows))
    return found


async def test_waiting_and_sending_come_apart_and_together_again(
    test_env: dict[str, str], scratch: infra.TestDatabase
) -> None:
    settings = load_settings({**test_env, "DATABASE_URL": scratch.url})
    resources = await Resources.open(settings, jobs=JOB_OPTIONS)
    earlier = datetime.now(UTC) - timedelta(hours=2)
    try:
        async with signed_in_creator(settings, resources) as owner:
            states = [LegState.PENDING] * 3 + [LegState.IN_FLIGHT] * 2 + [LegState.SENT]
            ids = await add_logs(
                resources,
                [
                    log_values(owner, state=state, recipient_id=str(n))
                    for n, state in enumerate(states)
                ]
                + [
                    log_values(owner, state=LegState.IN_FLIGHT, created_at=earlier),
                    log_values(
                        owner,
                        state=LegState.PENDING,
                        trigger_kind=TriggerKind.POSTBACK,
                        trigger_payload=f"reveal:{owner.campaign_id}:open",
                    ),
                ],
            )
    finally:
        await resources.close()

    _alembic(scratch.url, "downgrade", "0036")
    with psycopg.connect(scratch.url, autocommit=True) as conn:
        split = _split(conn)
        for table, (kept, rows) in split.items():
            assert kept == rows, table
        # Both slices, and the follow-on key, each with its deliveries waiting or in flight.
        assert len(split["delivery_counts"][1]) == 3
        assert sum(row[-1] for row in split["delivery_totals"][1]) == 3
        # The trigger 0036 had keeps them: a send in flight is answered, one is claimed.
        conn.execute("UPDATE dm_logs SET pr_state = 'SENT' WHERE id = %s", (ids[3],))
        conn.execute("UPDATE dm_logs SET pr_state = 'IN_FLIGHT' WHERE id = %s", (ids[0],))
        for table, (kept, rows) in _split(conn).items():
            assert kept == rows, table

    _alembic(scratch.url, "upgrade", "head")
    engine = create_engine(settings.database_url)
    try:
        assert await kept_count_differences(engine) == []
    finally:
        await engine.dispose()
