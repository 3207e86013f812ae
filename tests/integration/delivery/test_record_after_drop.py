"""The outcome of a send survives the database dropping the worker's connections meanwhile.

The worker's pool does not pre-ping (`worker/runner.py`), so after a PostgreSQL restart the
first statement on a kept connection is the one that fails; the delivery statements run
through the driver (`app/db/raw.py`), which raises psycopg's errors, not SQLAlchemy's. The
record must still be retried on a fresh connection (`app/delivery/send/steps.py:record`).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import text

from app.db.engine import autocommit
from app.db.models import AttemptClass, LegState
from app.delivery.send.dispatch import deliver
from app.jobs.registry import JOB_OPTIONS
from app.resources import Resources
from app.settings import Settings
from tests.integration.delivery.conftest import World

_CUT_OTHERS = text(
    "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity "
    "WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = "
    "'client backend'"
)


@pytest.fixture
async def worker_resources(delivery_settings: Settings) -> AsyncIterator[Resources]:
    """Resources as the worker opens them: no pre-ping. Sends may take 30 s, so Meta's slow
    answer below is an answer, not a timeout."""
    settings = dataclasses.replace(delivery_settings, send_timeout_s=30.0)
    opened = await Resources.open(settings, jobs=JOB_OPTIONS, db_pre_ping=False)
    try:
        yield opened
    finally:
        await opened.close()


async def test_an_outcome_is_recorded_after_the_connections_dropped_during_the_send(
    world: World, worker_resources: Resources
) -> None:
    row = await world.comment()
    # Meta takes its time answering: long enough to cut every connection meanwhile.
    world.admin.add_fault("messages", "latency", seconds=5.0, times=1)
    delivering = asyncio.create_task(
        deliver(worker_resources, worker_id="worker-1", dm_log_id=row.id)
    )
    deadline = asyncio.get_running_loop().time() + 60
    while (await world.log(row.id)).pr_requested_at is None:
        assert not delivering.done(), delivering.result()
        assert asyncio.get_running_loop().time() < deadline, "the request never left"
        await asyncio.sleep(0.05)
    async with autocommit(world.resources.engine) as killer:
        cut = (await killer.execute(_CUT_OTHERS)).scalar_one()
    assert cut >= 1  # the claim's connection, back in the worker's pool
    # Cut while the answer was still on its way: the record comes after.
    assert (await world.log(row.id)).pr_state is LegState.IN_FLIGHT

    report = await delivering

    assert report.private == LegState.SENT.value
    log = await world.log(row.id)
    assert log.pr_state is LegState.SENT
    attempts = await world.attempts(row.id)
    assert [a.classification for a in attempts] == [AttemptClass.SENT]
    assert len(world.inbox("jane.doe")) == 1
