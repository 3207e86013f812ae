"""The delivery counts kept by the trigger on `dm_logs` agree with a recount of the rows
through inserts, state changes, a campaign's, an account's and a workspace's deletion, and
under concurrent writers on one campaign (no deadlock, nothing lost); a claim (PENDING to
IN_FLIGHT) moves none of them and runs no counting statement. The delivery tests
(tests/integration/delivery) run the same oracle after every test, over the real send,
retry, reconcile, skip and manual-retry paths."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
from psycopg.errors import LockNotAvailable
from sqlalchemy import delete, func, select, text, update
from sqlalchemy.exc import DBAPIError

from app.db.engine import autocommit
from app.db.models import (
    Campaign,
    DeliveryCount,
    DmLog,
    InstagramAccount,
    LegState,
    MessageKind,
    TriggerKind,
    Workspace,
)
from app.delivery.send import claims
from app.delivery.send.legs import Claim
from app.delivery.send.quota import usage_month
from app.resources import Resources
from app.settings import Settings
from tests.support.dashboard import add_account
from tests.support.kept_counts import kept_count_differences
from tests.support.log_data import (
    Creator,
    add_campaign,
    add_logs,
    log_values,
    signed_in_creator,
)


@pytest.fixture
async def owner(settings: Settings, resources: Resources) -> AsyncIterator[Creator]:
    async with signed_in_creator(settings, resources) as creator:
        yield creator


async def kept(resources: Resources, **where: object) -> dict[str, int]:
    """Sums of the kept counts (sent, failed, waiting or being sent, link DMs, people) over
    `where`."""
    async with resources.sessionmaker() as session:
        row = (
            await session.execute(
                select(
                    func.coalesce(func.sum(DeliveryCount.sent), 0),
                    func.coalesce(func.sum(DeliveryCount.failed), 0),
                    func.coalesce(func.sum(DeliveryCount.unsettled), 0),
                    func.coalesce(func.sum(DeliveryCount.link_sent), 0),
                    func.coalesce(func.sum(DeliveryCount.passed_people), 0),
                ).filter_by(**where)
            )
        ).one()
    return dict(
        zip(("sent", "failed", "unsettled", "link_sent", "passed"), map(int, row), strict=True)
    )


async def test_counts_follow_every_change_of_the_rows(resources: Resources, owner: Creator) -> None:
    people = [str(1000 + n) for n in range(6)]
    ids = await add_logs(
        resources,
        [log_values(owner, state=LegState.PENDING, recipient_id=p) for p in people]
        + [
            log_values(
                owner,
                state=LegState.PENDING,
                recipient_id=people[0],
                trigger_kind=TriggerKind.POSTBACK,
                trigger_payload=f"reveal:{owner.campaign_id}:open",
            )
        ],
    )
    assert await kept(resources, campaign_id=owner.campaign_id) == {
        "sent": 0, "failed": 0, "unsettled": 7, "link_sent": 0, "passed": 0,
    }  # fmt: skip
    async with resources.sessionmaker() as session, session.begin():
        # Claimed, then sent as link DMs (two rows in one statement), one refused.
        await session.execute(
            update(DmLog).where(DmLog.id.in_(ids[:4])).values(pr_state=LegState.IN_FLIGHT)
        )
        await session.execute(
            update(DmLog)
            .where(DmLog.id.in_(ids[:3]))
            .values(pr_state=LegState.SENT, message_kind=MessageKind.REVEAL)
        )
        await session.execute(
            update(DmLog).where(DmLog.id == ids[3]).values(pr_state=LegState.FAILED)
        )
        # What counts nothing moves nothing.
        await session.execute(update(DmLog).where(DmLog.id == ids[0]).values(pr_attempts=2))
        # Proven delivered by Meta's answer to a retry.
        await session.execute(
            text(
                "UPDATE dm_logs SET pr_state = 'SENT', "
                'pr_evidence = \'{"confirmed_by": "meta_already_used"}\' WHERE id = :id'
            ),
            {"id": ids[4]},
        )
    assert await kept(resources, campaign_id=owner.campaign_id) == {
        "sent": 4, "failed": 1, "unsettled": 2, "link_sent": 3, "passed": 3,
    }  # fmt: skip
    assert await kept_count_differences(resources.engine) == []

    # A second link DM to a person already counted adds a DM, not a person.
    await add_logs(resources, [log_values(owner, recipient_id=people[0], message_kind="reveal")])
    assert (await kept(resources, campaign_id=owner.campaign_id))["passed"] == 3
    assert await kept_count_differences(resources.engine) == []

    # The oracle sees a count that is off.
    async with resources.sessionmaker() as session, session.begin():
        await session.execute(text("UPDATE delivery_counts SET failed = failed + 1"))
    assert await kept_count_differences(resources.engine) != []


async def test_deleting_a_campaign_an_account_or_a_workspace_keeps_them_true(
    resources: Resources, owner: Creator
) -> None:
    other_account = await add_account(
        resources, owner.workspace_id, ig_user_id="17841400000000077", username="north.side"
    )
    other_campaign = await add_campaign(resources, owner.workspace_id, other_account, "North")
    gone = await add_campaign(resources, owner.workspace_id, owner.account_id, "Gone")
    await add_logs(
        resources,
        [log_values(owner, campaign_id=gone, recipient_id=str(n)) for n in range(3)]
        + [log_values(owner, recipient_id=str(n)) for n in range(2)]
        + [
            log_values(
                owner, account_id=other_account, campaign_id=other_campaign, recipient_id="9"
            )
        ],
    )
    assert (await kept(resources, workspace_id=owner.workspace_id))["sent"] == 6

    # A deleted campaign's deliveries stay in the workspace's counts, under no campaign.
    async with resources.sessionmaker() as session, session.begin():
        await session.execute(delete(Campaign).where(Campaign.id == gone))
    assert (await kept(resources, workspace_id=owner.workspace_id))["sent"] == 6
    assert (await kept(resources, campaign_id=None))["sent"] == 3
    assert await kept_count_differences(resources.engine) == []

    # An account's deletion takes its deliveries and their counts.
    async with resources.sessionmaker() as session, session.begin():
        await session.execute(delete(InstagramAccount).where(InstagramAccount.id == other_account))
    assert (await kept(resources, workspace_id=owner.workspace_id))["sent"] == 5
    assert await kept_count_differences(resources.engine) == []

    async with resources.sessionmaker() as session, session.begin():
        await session.execute(delete(Workspace).where(Workspace.id == owner.workspace_id))
    async with resources.sessionmaker() as session:
        assert await session.scalar(select(func.count()).select_from(DeliveryCount)) == 0
    assert await kept_count_differences(resources.engine) == []


async def test_concurrent_writers_on_one_campaign_lose_nothing(
    resources: Resources, owner: Creator
) -> None:
    """Eight tasks move their own deliveries of one campaign (and of a second one, in the same
    statements) through claim and send at once, while another inserts: every write lands in the
    same few slices, and no statement deadlocks."""
    second = await add_campaign(resources, owner.workspace_id, owner.account_id, "Second")
    now = datetime.now(UTC)
    ids = await add_logs(
        resources,
        [
            log_values(
                owner,
                state=LegState.PENDING,
                campaign_id=owner.campaign_id if n % 2 else second,
                recipient_id=str(n),
                created_at=now,
            )
            for n in range(240)
        ],
    )
    tasks = 8
    shares = [ids[i::tasks] for i in range(tasks)]

    async def mover(share: list[int], seed: int) -> None:
        rng = random.Random(seed)
        rng.shuffle(share)
        for i in range(0, len(share), 3):
            batch = share[i : i + 3]  # rows of both campaigns in one statement
            async with resources.sessionmaker() as session, session.begin():
                await session.execute(
                    update(DmLog).where(DmLog.id.in_(batch)).values(pr_state=LegState.IN_FLIGHT)
                )
            async with resources.sessionmaker() as session, session.begin():
                await session.execute(
                    update(DmLog)
                    .where(DmLog.id.in_(batch))
                    .values(pr_state=LegState.SENT, message_kind=MessageKind.REVEAL)
                )

    async def inserter() -> None:
        for n in range(40):
            await add_logs(
                resources,
                [
                    log_values(
                        owner,
                        state=LegState.FAILED,
                        recipient_id=f"new{n}",
                        created_at=now,
                    )
                ],
            )

    await asyncio.gather(*(mover(share, n) for n, share in enumerate(shares)), inserter())

    async with resources.sessionmaker() as session:
        sent = await session.scalar(
            select(func.count()).select_from(DmLog).where(DmLog.pr_state == LegState.SENT)
        )
    assert sent == 240
    both = await kept(resources, workspace_id=owner.workspace_id)
    assert both == {"sent": 240, "failed": 40, "unsettled": 0, "link_sent": 240, "passed": 240}
    assert await kept_count_differences(resources.engine) == []


# Every table the counting statement writes: while another transaction holds them, a statement
# that runs it waits (here: fails at once, by its lock timeout).
_KEPT_TABLES = "delivery_counts, delivery_totals, delivery_workspace_quarters, funnel_people"


async def test_a_claim_runs_no_counting_statement(resources: Resources, owner: Creator) -> None:
    """PENDING and IN_FLIGHT are counted as one, so the trigger returns before its counting
    statement on a claim (which also writes the message's kind, the follow gate's evidence and a
    claim's stamps): the real
    claim goes through while the kept tables are locked, and the outcome, which moves a count,
    is stopped by the same lock."""
    [row] = await add_logs(resources, [log_values(owner, state=LegState.PENDING)])
    async with resources.engine.connect() as locker, autocommit(resources.engine) as conn:
        await locker.execute(text(f"LOCK TABLE {_KEPT_TABLES} IN ACCESS EXCLUSIVE MODE"))
        await conn.execute(text("SET lock_timeout = '100ms'"))
        try:
            claim = await claims.claim_private_reply(
                conn,
                dm_log_id=row,
                worker_id="w1",
                request_kind="text",
                message_text="Hi jane.doe!",
                month=usage_month(),
                evidence={"follow_gate": {"follows": True, "sent": "reveal"}},
            )
            assert isinstance(claim, Claim)
            assert claim.won
            with pytest.raises(DBAPIError) as stopped:
                await conn.execute(
                    update(DmLog).where(DmLog.id == row).values(pr_state=LegState.SENT)
                )
            assert isinstance(stopped.value.orig, LockNotAvailable)
        finally:
            await conn.execute(text("RESET lock_timeout"))
            await locker.rollback()
    assert (await log_state(resources, row)) is LegState.IN_FLIGHT
    assert await kept(resources, campaign_id=owner.campaign_id) == {
        "sent": 0, "failed": 0, "unsettled": 1, "link_sent": 0, "passed": 0,
    }  # fmt: skip
    assert await kept_count_differences(resources.engine) == []


async def log_state(resources: Resources, dm_log_id: int) -> LegState:
    async with resources.sessionmaker() as session:
        state = await session.scalar(select(DmLog.pr_state).where(DmLog.id == dm_log_id))
    assert state is not None
    return state
