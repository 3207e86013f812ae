"""Browser tests: Playwright drives Debian's Chromium against real web, sandbox (and, where a
test starts one, worker) processes.

Never `playwright install`: the machine has no internet and Debian's chromium is the browser.
These tests run in their own pytest process (`make e2e`), apart from the asyncio suites.

Process wiring (session scope): a port is chosen for the web process first, then the
Instagram sandbox starts with its webhook callback pointing at that port (it keeps retrying
the verification handshake until the web answers), then the web starts with its Graph API and
Instagram Login bases pointing at the sandbox and the same app id and secrets. Every test
starts from empty tables, an empty Redis db and a sandbox reset to its seed world.

Fixtures for flows built on top of this:
- `base_url`, `web_port`: the web process; `sandbox`: the `SandboxProcess` (`.admin` is a
  `SandboxAdmin` for faults, fans and inspection); `db_url`: the run's PostgreSQL database;
- `signed_in`: a page signed up as a new creator (see `tests/e2e/flows.py`);
- `connected`: the same, with @sunny.bakes connected through the sandbox consent page;
- `worker`: a real worker process (same settings as the web) that is beating when the test
  starts; function scope, because other tests need to see no worker at all.

Every test fails on a Content-Security-Policy violation reported in a browser console
(`_no_csp_violations`), on our pages and the sandbox's alike.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, ConsoleMessage, Page, expect

from tests.e2e.flows import Connected, SignedIn, connect_instagram, sign_up
from tests.support.dashboard import sandbox_env, web_env_for
from tests.support.infra import TestDatabase, TestRedis, truncate_all
from tests.support.options import default_option
from tests.support.processes import (
    Service,
    free_port,
    start_web,
    start_worker,
    worker_beating,
)
from tests.support.sandbox_process import SandboxProcess, start_sandbox

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
# Post thumbnails come straight from Instagram's CDN; the test machine has no internet.
CDN_PATTERN = "https://scontent.cdninstagram.com/**"


def pytest_configure(config: pytest.Config) -> None:
    # A failing browser test leaves a screenshot of the page (under test-results/playwright,
    # see tests/conftest.py) however pytest was started, not only through `make e2e`.
    default_option(config, "--screenshot", "only-on-failure")
    # A page the server renders (a save and its redirect, a campaign page's charts) took more
    # than Playwright's default 5 s on a machine at load 20: an expectation waits up to 15 s.
    # Only a failing check waits that long; what depends on the worker has bounds of its own.
    expect.set_options(timeout=15_000)


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


@pytest.fixture
def browser_context_args(browser_context_args: dict[str, Any], base_url: str) -> dict[str, Any]:
    # pytest-playwright computes these once per session with the first `base_url` it meets; a
    # directory that points `base_url` elsewhere (tests/e2e/sandbox) must not leak into others.
    return {**browser_context_args, "base_url": base_url}


@pytest.fixture(scope="session")
def _web_port_reserved() -> int:
    return free_port()


@pytest.fixture(scope="session")
def sandbox(
    test_env: dict[str, str], _web_port_reserved: int, artifacts_dir: Path
) -> Iterator[SandboxProcess]:
    env = {
        **sandbox_env(test_env),
        "SANDBOX_WEBHOOK_CALLBACK_URL": f"http://127.0.0.1:{_web_port_reserved}/webhooks/instagram",
        "SANDBOX_WEBHOOK_VERIFY_TOKEN": test_env["WEBHOOK_VERIFY_TOKEN"],
    }
    # free_port() may hand out the port just reserved for the web again: choose another.
    port = free_port()
    while port == _web_port_reserved:
        port = free_port()
    with start_sandbox(env, port, log_dir=artifacts_dir) as process:
        yield process


@pytest.fixture(scope="session")
def web_env(
    test_env: dict[str, str], sandbox: SandboxProcess, _web_port_reserved: int
) -> dict[str, str]:
    """The environment of the web process (and of workers a test starts beside it)."""
    return web_env_for(
        test_env, sandbox.base_url, public_base_url=f"http://127.0.0.1:{_web_port_reserved}"
    )


@pytest.fixture(scope="session")
def web_port(
    web_env: dict[str, str], _web_port_reserved: int, artifacts_dir: Path
) -> Iterator[int]:
    service: Service = start_web(web_env, _web_port_reserved, artifacts_dir)
    try:
        yield _web_port_reserved
    finally:
        service.stop()


@pytest.fixture(scope="session")
def base_url(web_port: int) -> str:
    return f"http://127.0.0.1:{web_port}"


@pytest.fixture(scope="session")
def db_url(test_database: TestDatabase) -> str:
    return test_database.url


@pytest.fixture(autouse=True)
def _clean_slate(request: pytest.FixtureRequest) -> None:
    if "test_env" not in request.fixturenames:
        return
    database: TestDatabase = request.getfixturevalue("test_database")
    redis_db: TestRedis = request.getfixturevalue("test_redis")
    truncate_all(database.url)
    redis_db.flush()
    if "sandbox" in request.fixturenames:
        sandbox: SandboxProcess = request.getfixturevalue("sandbox")
        sandbox.admin.reset()


@pytest.fixture(autouse=True)
def _no_internet_images(request: pytest.FixtureRequest) -> None:
    """Fail CDN image requests at once instead of waiting on DNS in a closed network."""
    if "page" in request.fixturenames:
        page: Page = request.getfixturevalue("page")
        page.route(CDN_PATTERN, lambda route: route.abort())


@pytest.fixture(autouse=True)
def _no_csp_violations(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """Fail the test on any Content-Security-Policy violation Chromium reports in a console,
    on the test's page and in any other browser context the test opens."""
    violations: list[str] = []

    def watch(context: BrowserContext) -> None:
        def seen(message: ConsoleMessage) -> None:
            if "Content Security Policy" in message.text:
                violations.append(f"{message.location.get('url')}: {message.text}")

        context.on("console", seen)

    if "browser" in request.fixturenames or "page" in request.fixturenames:
        browser: Browser = request.getfixturevalue("browser")
        opened = browser.new_context

        def new_context(*args: Any, **kwargs: Any) -> BrowserContext:
            context = opened(*args, **kwargs)
            watch(context)
            return context

        monkeypatch.setattr(browser, "new_context", new_context)
    if "page" in request.fixturenames:
        watch(request.getfixturevalue("page").context)
    yield
    assert not violations, "Content-Security-Policy violations:\n" + "\n".join(violations)


@pytest.fixture
def signed_in(page: Page, base_url: str) -> SignedIn:
    """A new creator, signed up and signed in, on the Accounts page."""
    return sign_up(page, "creator@example.com", workspace="Sunny Bakes")


@pytest.fixture
def connected(signed_in: SignedIn, sandbox: SandboxProcess) -> Connected:
    """A signed-in creator whose @sunny.bakes is connected through the sandbox's consent page."""
    return connect_instagram(signed_in.page, "sunny.bakes")


@pytest.fixture
def worker(web_env: dict[str, str], web_port: int, artifacts_dir: Path) -> Iterator[Service]:
    """A worker process delivering for this test; stopped (SIGTERM, drained) after it."""
    service = start_worker(web_env, artifacts_dir)
    try:
        service.wait_until_ready(
            lambda: worker_beating(web_port), interval=0.25, what="the worker's first heartbeat"
        )
        yield service
    finally:
        service.stop()
