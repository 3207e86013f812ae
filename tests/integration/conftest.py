"""Integration fixtures: real settings, real connections, and a clean slate per test."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from app.jobs.registry import JOB_OPTIONS
from app.resources import Resources
from app.settings import Settings, load_settings
from tests.support.infra import TestDatabase, TestRedis, truncate_all


@pytest.fixture(scope="session")
def settings(test_env: dict[str, str]) -> Settings:
    return load_settings(test_env)


@pytest.fixture(scope="session")
async def resources(settings: Settings) -> AsyncIterator[Resources]:
    opened = await Resources.open(settings, jobs=JOB_OPTIONS)
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture(autouse=True)
def _clean_slate(request: pytest.FixtureRequest) -> None:
    """Tests that use the database or Redis start from empty tables and an empty Redis db."""
    if "test_env" not in request.fixturenames:
        return
    database: TestDatabase = request.getfixturevalue("test_database")
    redis_db: TestRedis = request.getfixturevalue("test_redis")
    truncate_all(database.url)
    redis_db.flush()
