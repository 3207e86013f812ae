"""Helpers for the reconciler and next-post tests: what the ledger holds, the webhook path for a
sandbox comment, and running the deliveries a worker would run."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from app.db.models import (
    Campaign,
    CampaignScope,
    CampaignStatus,
    Comment,
    DmLog,
    InstagramAccount,
    LegState,
    OperationalEvent,
)
from app.delivery.intake.outbox import run_ingest
from app.delivery.send.dispatch import deliver
from app.delivery.send.steps import Report
from tests.integration.delivery.conftest import SUNNY, World
from tests.support.webhooks import comments_body, store_event


async def ledger(world: World) -> list[Comment]:
    async with world.resources.sessionmaker() as session:
        return list(await session.scalars(select(Comment).order_by(Comment.id)))


async def logs(world: World) -> list[DmLog]:
    async with world.resources.sessionmaker() as session:
        return list(await session.scalars(select(DmLog).order_by(DmLog.id)))


async def events(world: World, kind: str) -> list[OperationalEvent]:
    async with world.resources.sessionmaker() as session:
        rows = await session.scalars(
            select(OperationalEvent)
            .where(OperationalEvent.kind == kind)
            .order_by(OperationalEvent.id)
        )
        return list(rows)


async def account(world: World) -> InstagramAccount:
    async with world.resources.sessionmaker() as session:
        row = await session.get(InstagramAccount, world.account_id)
        assert row is not None
        return row


async def campaign(world: World, campaign_id: int) -> Campaign:
    async with world.resources.sessionmaker() as session:
        row = await session.get(Campaign, campaign_id)
        assert row is not None
        return row


async def add_campaign(world: World, name: str, **fields: Any) -> int:
    """An active campaign of the world's account; any column can be given."""
    values: dict[str, Any] = {
        "status": CampaignStatus.ACTIVE,
        "scope": CampaignScope.ANY_POST,
        "keywords": ["recipe"],
        "dm_text": "Hi {username}! Here it is: {link}",
    }
    async with world.resources.sessionmaker() as session:
        row = Campaign(
            workspace_id=world.workspace_id,
            account_id=world.account_id,
            name=name,
            **(values | fields),
        )
        session.add(row)
        await session.commit()
        return row.id


async def activated_minutes_ago(world: World, campaign_id: int, minutes: float) -> None:
    await world.execute(
        "UPDATE campaigns SET activated_at = now() - make_interval(secs => :s) WHERE id = :id",
        s=minutes * 60,
        id=campaign_id,
    )


async def deliver_pending(world: World) -> list[Report]:
    """Run the delivery job for every row still PENDING, as the worker would."""
    return [
        await deliver(world.resources, worker_id="test", dm_log_id=row.id)
        for row in await logs(world)
        if row.pr_state is LegState.PENDING
    ]


def webhook_body(world: World, comment_id: str) -> bytes:
    """The `comments` webhook the sandbox emitted for this comment (it had no callback to send
    it to), as Meta would POST it."""
    emitted = world.admin.webhook_events(field="comments")["events"]
    values: list[dict[str, Any]] = [e["value"] for e in emitted if e["value"]["id"] == comment_id]
    assert len(values) == 1, emitted
    return comments_body(values[0], account=SUNNY)


async def arrive_by_webhook(world: World, comment_id: str) -> dict[str, object]:
    """Store the comment's webhook as the web process would and run the worker's ingest job."""
    async with world.resources.sessionmaker() as session, session.begin():
        event_id = await store_event(session, webhook_body(world, comment_id))
    return await run_ingest(world.resources, [event_id])
