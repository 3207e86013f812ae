"""Delivery tests: real PostgreSQL and Redis, and the Instagram sandbox as a real subprocess.

`delivery_env` is the test environment pointed at the sandbox with a short send timeout (so
"hang past the client timeout" takes a second, not ten). `world` resets the sandbox, mints a
token for @sunny.bakes and stores the workspace, account and an active campaign; `world.new`
makes a fan comment in the sandbox and the `dm_logs` row ingestion would have written.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from app.accounts.tokens import seal_access_token
from app.crypto import TokenCipher
from app.db.models import (
    Campaign,
    CampaignScope,
    CampaignStatus,
    DeliveryAttempt,
    DmLog,
    InstagramAccount,
    LegState,
    TriggerKind,
    Workspace,
)
from app.delivery.recovery.manual_retry import RetryResult, request_retry
from app.jobs.registry import JOB_OPTIONS
from app.resources import Resources
from app.settings import Settings, load_settings
from sandbox.client import SandboxAdmin
from tests.support.kept_counts import kept_count_differences
from tests.support.sandbox_process import SandboxProcess, start_sandbox

SUNNY = "17841458120395731"
LEMON_REEL = "17918195224117851"
SEND_TIMEOUT_S = 1.5


@pytest.fixture(scope="session")
def sandbox_process() -> Iterator[SandboxProcess]:
    with start_sandbox() as process:
        yield process


@pytest.fixture(scope="session")
def delivery_env(test_env: dict[str, str], sandbox_process: SandboxProcess) -> dict[str, str]:
    return {
        **test_env,
        "GRAPH_API_BASE": sandbox_process.graph_base,
        "SEND_TIMEOUT_S": str(SEND_TIMEOUT_S),
        "QUEUE_NAME": "delivery-tests",
    }


@pytest.fixture(scope="session")
def delivery_settings(delivery_env: dict[str, str]) -> Settings:
    return load_settings(delivery_env)


@pytest.fixture(scope="session")
async def delivery_resources(delivery_settings: Settings) -> AsyncIterator[Resources]:
    opened = await Resources.open(delivery_settings, jobs=JOB_OPTIONS, db_pool_size=20)
    try:
        yield opened
    finally:
        await opened.close()


@dataclass
class World:
    """One creator account with an active campaign, and helpers to make comments."""

    resources: Resources
    admin: SandboxAdmin
    token: str
    workspace_id: int
    account_id: int
    campaign_id: int
    fans: list[str] = field(default_factory=list)

    async def new_fan(self, name: str) -> str:
        self.admin.add_fan(name)
        self.fans.append(name)
        return name

    async def comment(
        self,
        fan: str = "jane.doe",
        text: str = "RECIPE please",
        *,
        campaign_id: int | None = None,
        public: bool = False,
        age: timedelta = timedelta(0),
    ) -> DmLog:
        """A fan comments in the sandbox; store the log row ingestion would have written."""
        made = self.admin.fan_comment(fan, LEMON_REEL, text)
        commented_at = datetime.now(UTC) - age
        row = DmLog(
            workspace_id=self.workspace_id,
            account_id=self.account_id,
            campaign_id=campaign_id or self.campaign_id,
            campaign_version=1,
            trigger_kind=TriggerKind.COMMENT,
            trigger_id=made["id"],
            recipient_id=made["from"]["id"],
            recipient_username=made["from"]["username"],
            trigger_text=text,
            matched_keyword="recipe",
            media_id=LEMON_REEL,
            deadline_at=commented_at + timedelta(days=7),
            pr_state=LegState.PENDING,
            pub_state=LegState.PENDING if public else None,
        )
        async with self.resources.sessionmaker() as session:
            session.add(row)
            await session.commit()
        return row

    async def campaign(self, **changes: Any) -> int:
        async with self.resources.sessionmaker() as session:
            campaign = Campaign(
                workspace_id=self.workspace_id,
                account_id=self.account_id,
                name=changes.pop("name", "Lemon loaf"),
                status=CampaignStatus.ACTIVE,
                scope=changes.pop("scope", CampaignScope.ANY_POST),
                keywords=changes.pop("keywords", ["recipe"]),
                dm_text=changes.pop("dm_text", "Hi {username}! Here it is: {link}"),
                buttons=changes.pop("buttons", []),
                **changes,
            )
            session.add(campaign)
            await session.commit()
            return campaign.id

    async def log(self, dm_log_id: int) -> DmLog:
        async with self.resources.sessionmaker() as session:
            row = await session.get(DmLog, dm_log_id)
            assert row is not None
            return row

    async def attempts(self, dm_log_id: int) -> list[DeliveryAttempt]:
        from sqlalchemy import select

        async with self.resources.sessionmaker() as session:
            rows = await session.scalars(
                select(DeliveryAttempt)
                .where(DeliveryAttempt.dm_log_id == dm_log_id)
                .order_by(DeliveryAttempt.id)
            )
            return list(rows)

    async def execute(self, sql: str, **params: Any) -> None:
        from sqlalchemy import text

        async with self.resources.sessionmaker() as session:
            await session.execute(text(sql), params)
            await session.commit()

    async def retry(
        self, dm_log_id: int, *, confirm: bool, workspace_id: int | None = None
    ) -> RetryResult:
        """The dashboard's Retry button, as its controller calls it."""
        async with self.resources.sessionmaker() as session:
            return await request_retry(
                session,
                self.resources.queue,
                workspace_id=self.workspace_id if workspace_id is None else workspace_id,
                dm_log_id=dm_log_id,
                confirm_unconfirmed=confirm,
            )

    def stats(self, comment_id: str) -> dict[str, Any]:
        stats: dict[str, Any] = self.admin.comment_stats(comment_id)
        return stats

    def inbox(self, fan: str) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = self.admin.inbox(fan)["messages"]
        return messages


async def seed_world(
    resources: Resources, admin: SandboxAdmin, *, quota: int | None = None
) -> World:
    admin.reset(keep_webhook=False)
    admin.update_settings(sends_per_second=100_000, conversations_per_second=1000)
    minted = admin.mint_token("sunny.bakes", age_seconds=2 * 24 * 3600)
    cipher: TokenCipher = resources.cipher
    now = datetime.now(UTC)
    async with resources.sessionmaker() as session:
        workspace = Workspace(name="Sunny's", monthly_dm_quota=quota)
        session.add(workspace)
        await session.flush()
        account = InstagramAccount(
            workspace_id=workspace.id,
            ig_user_id=SUNNY,
            username="sunny.bakes",
            token_issued_at=now - timedelta(days=2),
            token_expires_at=now + timedelta(days=58),
        )
        seal_access_token(cipher, account, minted["access_token"])
        session.add(account)
        await session.commit()
        world = World(resources, admin, minted["access_token"], workspace.id, account.id, 0)
    world.campaign_id = await world.campaign()
    return world


@pytest.fixture
async def world(
    delivery_resources: Resources, sandbox_process: SandboxProcess, test_env: dict[str, str]
) -> AsyncIterator[World]:
    yield await seed_world(delivery_resources, sandbox_process.admin)
    # Whatever the test drove (sends, retries, reconciling, skips, manual retries), the kept
    # delivery counts still agree with the rows.
    assert await kept_count_differences(delivery_resources.engine) == []
