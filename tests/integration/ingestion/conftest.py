"""Ingestion tests: a real web process for the HTTP side, in-process ingest for the worker side.

The worker's job function is called directly (`run_ingest`) rather than through a worker
process, so a test controls when ingestion happens and sees the queue it leaves behind; one
test in `test_webhooks.py` runs the whole path through real web and worker processes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.processes import Service, free_port, start_web

# Small enough to test 413 cheaply, large enough for a 1000-comment POST (~260 KB).
MAX_BODY = 512 * 1024


@pytest.fixture(scope="session")
def web_port(test_env: dict[str, str], artifacts_dir: Path) -> Iterator[int]:
    port = free_port()
    web: Service = start_web(
        test_env | {"WEBHOOK_MAX_BODY_BYTES": str(MAX_BODY)}, port, artifacts_dir / "ingestion"
    )
    try:
        yield port
    finally:
        web.stop()


@pytest.fixture
async def client(web_port: int) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{web_port}", timeout=10) as http:
        yield http
