"""Browser tests: Playwright drives Debian's Chromium against real web and worker processes.

Never `playwright install`: the machine has no internet and Debian's chromium is the browser.
These tests run in their own pytest process (`make e2e`), apart from the asyncio suites.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.infra import TestDatabase, TestRedis, truncate_all
from tests.support.processes import Service, free_port, start_web

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
]


def chromium_path() -> str:
    path = os.environ.get("CHROMIUM_PATH") or shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(path).exists():
        pytest.fail(
            "Debian's chromium is not installed: run `make chromium` (never playwright install)"
        )
    return path


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict[str, Any]) -> dict[str, Any]:
    return {
        **browser_type_launch_args,
        "executable_path": chromium_path(),
        "headless": True,
        "args": CHROMIUM_ARGS,
    }


@pytest.fixture(scope="session")
def web_port(test_env: dict[str, str], artifacts_dir: Path) -> Iterator[int]:
    port = free_port()
    service: Service = start_web(test_env, port, artifacts_dir)
    try:
        yield port
    finally:
        service.stop()


@pytest.fixture(scope="session")
def base_url(web_port: int) -> str:
    return f"http://127.0.0.1:{web_port}"


@pytest.fixture(autouse=True)
def _clean_slate(request: pytest.FixtureRequest) -> None:
    if "test_env" not in request.fixturenames:
        return
    database: TestDatabase = request.getfixturevalue("test_database")
    redis_db: TestRedis = request.getfixturevalue("test_redis")
    truncate_all(database.url)
    redis_db.flush()
