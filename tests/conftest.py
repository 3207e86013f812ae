"""Shared test setup: per-run PostgreSQL database and Redis db, settings for test processes.

Nothing here reads a developer's `.env`: every value a test process sees is set below.
Databases and Redis are only touched by tests that ask for them (unit tests never do).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings

from tests.support.infra import TestDatabase, TestRedis, base_env
from tests.support.options import default_option

os.environ["ONCEREPLY_ENV_FILE"] = ""

# `make test` gives the same answer on every run: hypothesis tries the same examples each time
# rather than new random ones, which could fail a run on a change that has nothing to do with
# them. HYPOTHESIS_PROFILE=explore searches afresh (and keeps what it finds in .hypothesis/).
hypothesis_settings.register_profile("repeatable", derandomize=True, database=None)
hypothesis_settings.register_profile("explore")
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))

ARTIFACTS = Path(__file__).resolve().parents[1] / "test-results"


def pytest_configure(config: pytest.Config) -> None:
    # pytest-playwright deletes its --output directory at the start of every run, unit and
    # integration runs included (an autouse fixture). Its default is test-results/, where the
    # web, worker and sandbox logs of this and other runs live: keep it in a folder of its own.
    default_option(config, "--output", str(ARTIFACTS / "playwright"))


@pytest.fixture(scope="session")
def test_database() -> Iterator[TestDatabase]:
    database = TestDatabase.create()
    try:
        database.migrate()
        yield database
    finally:
        database.drop()


@pytest.fixture(scope="session")
def test_redis() -> Iterator[TestRedis]:
    reserved = TestRedis.reserve()
    try:
        yield reserved
    finally:
        reserved.release()


@pytest.fixture(scope="session")
def test_env(test_database: TestDatabase, test_redis: TestRedis) -> dict[str, str]:
    """Environment for the app, the worker and CLI subprocesses of this run."""
    return base_env(test_database.url, test_redis.url)


@pytest.fixture(scope="session")
def artifacts_dir() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS
