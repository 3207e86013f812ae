"""One real ``python -m sandbox`` subprocess for the session, reset before every test.

The sandbox starts with a webhook receiver as its callback (registered in the background,
as ``make dev`` does), and every test talks to it over HTTP only.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from sandbox.client import SandboxAdmin
from tests.integration.sandbox.helpers import APP_ID, APP_SECRET, META_SECRET, VERIFY_TOKEN
from tests.support.processes import wait_until
from tests.support.sandbox_process import SandboxProcess, WebhookReceiver, start_sandbox


@pytest.fixture(scope="session")
def receiver() -> Iterator[WebhookReceiver]:
    with WebhookReceiver(verify_token=VERIFY_TOKEN) as started:
        yield started


@pytest.fixture(scope="session")
def sandbox_process(receiver: WebhookReceiver) -> Iterator[SandboxProcess]:
    env = {
        "SANDBOX_INSTAGRAM_APP_ID": APP_ID,
        "SANDBOX_INSTAGRAM_APP_SECRET": APP_SECRET,
        "SANDBOX_META_APP_SECRET": META_SECRET,
        "SANDBOX_WEBHOOK_CALLBACK_URL": receiver.url,
        "SANDBOX_WEBHOOK_VERIFY_TOKEN": VERIFY_TOKEN,
    }
    with start_sandbox(env) as process:
        wait_until(
            lambda: bool(process.admin.webhook()["registered"]),
            timeout=10,
            what="the sandbox to verify its webhook callback",
        )
        yield process


@pytest.fixture
def admin(sandbox_process: SandboxProcess, receiver: WebhookReceiver) -> SandboxAdmin:
    """The admin client, after a reset to the fixture (webhook registration kept)."""
    sandbox_process.admin.reset()
    receiver.clear()
    return sandbox_process.admin


@pytest.fixture
def graph(sandbox_process: SandboxProcess, admin: SandboxAdmin) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=sandbox_process.graph_base, timeout=10) as client:
        yield client


@pytest.fixture
def token(admin: SandboxAdmin) -> str:
    """A dashboard-style long-lived token for @sunny.bakes, subscribed to the usual fields."""
    minted = admin.mint_token(
        "sunny.bakes", subscribe=["comments", "messages", "messaging_postbacks", "messaging_seen"]
    )
    value: str = minted["access_token"]
    return value
