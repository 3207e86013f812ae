"""Helpers for the two-step, follow-gate, DM-trigger and follow-up tests.

`Hooks` carries the webhooks the sandbox emitted (it has no callback in these tests) into our
ingest, the way the web process would store them and the worker ingest them — as many copies
as asked, to model Meta's redeliveries. `run_due` is the worker's delivery loop in process:
every PENDING row that is due goes through the flow its kind needs, until nothing is left.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select, text

from app.db.models import DmLog, LegState, MessageKind, MessagingEvent, TriggerKind
from app.delivery.intake.outbox import run_ingest
from app.delivery.send.dispatch import deliver
from app.delivery.send.steps import Report
from tests.integration.delivery.conftest import SUNNY, World
from tests.support.links import destination_or_none
from tests.support.webhooks import comments_body, messaging_body, store_event

ACCOUNT = "sunny.bakes"
LINK = {"title": "The recipe", "url": "https://example.com/lemon-loaf"}


async def two_step_campaign(world: World, **fields: Any) -> int:
    """A campaign that outranks the world's own one, with a link button; any column can be
    given (opening DM, follow gate, follow-up, DM trigger…)."""
    values: dict[str, Any] = {
        "name": "Two-step",
        "priority": 10,
        "dm_text": "Here it is, {username}!",
        "buttons": [LINK],
    }
    return await world.campaign(**(values | fields))


@dataclass
class Hooks:
    """The sandbox's emitted webhooks, ingested once each (or `copies` times)."""

    world: World
    seen: set[int] = field(default_factory=set)

    async def deliver(self, fieldname: str | None = None, *, copies: int = 1) -> dict[str, Any]:
        emitted = self.world.admin.webhook_events(field=fieldname)["events"]
        fresh = [event for event in emitted if event["id"] not in self.seen]
        self.seen.update(event["id"] for event in fresh)
        bodies = [_body(event) for event in fresh]
        async with self.world.resources.sessionmaker() as session, session.begin():
            ids = [await store_event(session, body) for body in bodies for _ in range(copies)]
        summary: dict[str, Any] = {}
        for event_id in ids:  # one POST, one ingest job each, as redeliveries would arrive
            for key, value in (await run_ingest(self.world.resources, [event_id])).items():
                summary[key] = summary.get(key, 0) + value
        return summary


def _body(event: dict[str, Any]) -> bytes:
    if event["field"] == "comments":
        return comments_body(event["value"], account=SUNNY)
    return messaging_body(event["value"], account=SUNNY)


async def run_due(world: World, *, rounds: int = 6) -> list[Report]:
    """Deliver every due PENDING row as the worker would, until none is left."""
    reports: list[Report] = []
    for _ in range(rounds):
        due = [row for row in await logs(world) if _due(row)]
        if not due:
            break
        reports.extend(
            [
                await deliver(
                    world.resources, worker_id="test", dm_log_id=row.id, kind=row.trigger_kind
                )
                for row in due
            ]
        )
    return reports


def _due(row: DmLog) -> bool:
    soon = datetime.now(UTC) + timedelta(seconds=1)
    pending = [
        (row.pr_state, row.pr_next_attempt_at),
        (row.pub_state, row.pub_next_attempt_at),
    ]
    return any(state is LegState.PENDING and (at is None or at <= soon) for state, at in pending)


async def make_due(world: World, dm_log_id: int) -> None:
    """As if the row's wait (a re-check, a follow-up delay) were over."""
    await world.execute(
        "UPDATE dm_logs SET pr_next_attempt_at = now() - interval '1 second' WHERE id = :id",
        id=dm_log_id,
    )


async def logs(world: World, kind: TriggerKind | None = None) -> list[DmLog]:
    async with world.resources.sessionmaker() as session:
        statement = select(DmLog).order_by(DmLog.id)
        if kind is not None:
            statement = statement.where(DmLog.trigger_kind == kind)
        return list(await session.scalars(statement))


async def one(world: World, kind: TriggerKind) -> DmLog:
    rows = await logs(world, kind)
    assert len(rows) == 1, [(r.id, r.trigger_id, r.pr_state) for r in rows]
    return rows[0]


async def ledger(world: World) -> list[MessagingEvent]:
    async with world.resources.sessionmaker() as session:
        return list(await session.scalars(select(MessagingEvent).order_by(MessagingEvent.id)))


async def count(world: World, sql: str, **params: Any) -> int:
    async with world.resources.sessionmaker() as session:
        return int((await session.execute(text(sql), params)).scalar_one())


def buttons_of(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The buttons of a message in a fan's inbox (a button template), else []."""
    attachment = message.get("attachment") or {}
    payload = attachment.get("payload") if isinstance(attachment, dict) else None
    return list(payload.get("buttons") or []) if isinstance(payload, dict) else []


def text_of(message: dict[str, Any]) -> str:
    """What the fan reads: the text, or a template's text."""
    attachment = message.get("attachment") or {}
    payload = attachment.get("payload") if isinstance(attachment, dict) else None
    if isinstance(payload, dict) and payload.get("text"):
        return str(payload["text"])
    return str(message.get("text") or "")


def reveals(world: World, fan: str) -> list[dict[str, Any]]:
    """The messages in the fan's inbox that carry the campaign's link."""
    return [
        m
        for m in world.inbox(fan)
        if LINK["url"]
        in [destination_or_none(str(b.get("url"))) for b in buttons_of(m)]
        + [destination_or_none(word) for word in text_of(m).split()]
    ]


def kinds(rows: list[DmLog]) -> list[tuple[str, str | None, str]]:
    return [
        (
            row.trigger_kind.value,
            row.message_kind.value if isinstance(row.message_kind, MessageKind) else None,
            row.pr_state.value,
        )
        for row in rows
    ]
