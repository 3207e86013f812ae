"""The fan page in Chromium: a real sandbox subprocess with a webhook receiver as its callback.

Chromium's launch options come from ``tests/e2e/conftest.py`` (Debian's chromium, headless,
background networking off). ``base_url`` points pytest-playwright's pages at the sandbox, so
these tests need neither the product's web process nor its database.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.processes import wait_until
from tests.support.sandbox_process import SandboxProcess, WebhookReceiver, start_sandbox

APP_SECRET = "e2e-instagram-app-secret"
VERIFY_TOKEN = "e2e-verify-token"


@pytest.fixture(scope="session")
def receiver() -> Iterator[WebhookReceiver]:
    with WebhookReceiver(verify_token=VERIFY_TOKEN) as started:
        yield started


@pytest.fixture(scope="session")
def sandbox_process(receiver: WebhookReceiver) -> Iterator[SandboxProcess]:
    env = {
        "SANDBOX_INSTAGRAM_APP_SECRET": APP_SECRET,
        "SANDBOX_WEBHOOK_CALLBACK_URL": receiver.url,
        "SANDBOX_WEBHOOK_VERIFY_TOKEN": VERIFY_TOKEN,
    }
    with start_sandbox(env) as process:
        wait_until(
            lambda: bool(process.admin.webhook()["registered"]),
            timeout=60,  # milliseconds when idle; the bound is for a loaded machine
            what="the sandbox to verify its webhook callback",
        )
        yield process


@pytest.fixture(scope="session")
def app_secret() -> str:
    """The Instagram app secret the sandbox signs webhooks with."""
    return APP_SECRET


@pytest.fixture(scope="session")
def base_url(sandbox_process: SandboxProcess) -> str:
    return sandbox_process.base_url


@pytest.fixture
def fresh(sandbox_process: SandboxProcess, receiver: WebhookReceiver) -> SandboxProcess:
    sandbox_process.admin.reset()
    receiver.clear()
    return sandbox_process
