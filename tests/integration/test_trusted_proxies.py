"""The web process believes `X-Forwarded-For` only from `TRUSTED_PROXIES`: behind the compose
stack's reverse proxy the client's address is the one the proxy saw, and a client talking to
the web process directly cannot claim another one."""

from __future__ import annotations

from pathlib import Path

import httpx
from sqlalchemy import select

from app.db.models import OperationalEvent
from app.resources import Resources
from tests.support.processes import free_port, start_web

CLAIMED = "203.0.113.7"


async def _client_recorded_for_a_forged_webhook(
    env: dict[str, str], artifacts_dir: Path, resources: Resources
) -> object:
    """POST a wrongly signed webhook with a forwarded address; the refusal records the client."""
    port = free_port()
    web = start_web(env, port, artifacts_dir)
    try:
        async with httpx.AsyncClient(timeout=30) as client:
            answer = await client.post(
                f"http://127.0.0.1:{port}/webhooks/instagram",
                content=b"{}",
                headers={"X-Hub-Signature-256": "sha256=" + "0" * 64, "X-Forwarded-For": CLAIMED},
            )
        assert answer.status_code == 401, answer.text
    finally:
        web.stop()
    async with resources.sessionmaker() as session:
        details = await session.scalar(
            select(OperationalEvent.details)
            .where(OperationalEvent.kind == "webhook_signature_invalid")
            .order_by(OperationalEvent.id.desc())
            .limit(1)
        )
    assert isinstance(details, dict), details
    return details.get("client")


async def test_forwarded_address_is_believed_from_a_trusted_proxy(
    test_env: dict[str, str], artifacts_dir: Path, resources: Resources
) -> None:
    env = {**test_env, "TRUSTED_PROXIES": "127.0.0.1"}
    assert await _client_recorded_for_a_forged_webhook(env, artifacts_dir, resources) == CLAIMED


async def test_forwarded_address_is_ignored_from_anyone_else(
    test_env: dict[str, str], artifacts_dir: Path, resources: Resources
) -> None:
    env = {**test_env, "TRUSTED_PROXIES": "172.30.116.2"}
    assert await _client_recorded_for_a_forged_webhook(env, artifacts_dir, resources) == "127.0.0.1"
