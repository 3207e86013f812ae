"""The hourly private-reply budget (Redis) and the monthly quota (Postgres), raced for real."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from typing import Any

import pytest
from redis.asyncio import Redis
from sqlalchemy import text

from app.db.engine import autocommit
from app.db.models import LegState
from app.delivery.send import quota
from app.delivery.send.budget import BudgetFull, HourlyBudget, Slot, budget_key
from app.delivery.send.dispatch import deliver
from tests.integration.delivery.conftest import World


async def test_budget_admits_exactly_the_limit_under_a_race(world: World) -> None:
    redis: Redis = world.resources.redis
    budget = HourlyBudget(redis, limit=5, window_s=60)
    results = await asyncio.gather(*(budget.reserve(1) for _ in range(40)))
    slots = [r for r in results if isinstance(r, Slot)]
    full = [r for r in results if isinstance(r, BudgetFull)]
    assert len(slots) == 5
    assert len(full) == 35
    assert all(0 < r.wait_s <= 60 for r in full)
    assert await budget.used(1) == 5
    await budget.release(slots[0])
    assert isinstance(await budget.reserve(1), Slot)
    assert isinstance(await budget.reserve(2), Slot), "budgets are per account"


async def test_budget_frees_as_the_window_slides(world: World) -> None:
    budget = HourlyBudget(world.resources.redis, limit=1, window_s=0.5)
    assert isinstance(await budget.reserve(7), Slot)
    full = await budget.reserve(7)
    assert isinstance(full, BudgetFull)
    await asyncio.sleep(full.wait_s + 0.05)
    assert isinstance(await budget.reserve(7), Slot)


async def test_quota_is_taken_by_exactly_as_many_as_it_allows(world: World) -> None:
    await world.execute("UPDATE workspaces SET monthly_dm_quota = 3")
    limited = world
    async with autocommit(world.resources.engine) as conn:

        async def one() -> bool:
            async with autocommit(world.resources.engine) as own:
                return await quota.reserve(own, limited.workspace_id)

        results = await asyncio.gather(*(one() for _ in range(12)))
        assert sum(results) == 3
        assert (await quota.usage(conn, limited.workspace_id)).remaining == 0
        await quota.release(conn, limited.workspace_id, quota.usage_month())
        assert (await quota.usage(conn, limited.workspace_id)).reserved == 2


async def test_a_workspace_without_a_cap_is_not_counted(world: World) -> None:
    # Every claim of a counted workspace locks its month's counter row until it commits;
    # without a cap there is nothing to count, so the claims do not queue behind each other.
    comments = [await world.comment(name) for name in ("jane.doe", "marco_rossi", "olga.petrova")]
    reports = await asyncio.gather(
        *(deliver(world.resources, worker_id="w", dm_log_id=c.id) for c in comments)
    )
    assert [report.private for report in reports] == ["SENT"] * 3
    async with autocommit(world.resources.engine) as conn:
        counters = await conn.scalar(text("SELECT count(*) FROM usage_counters"))
        assert counters == 0
        assert await quota.reserve(conn, world.workspace_id)
        assert (await quota.usage(conn, world.workspace_id)).remaining is None

    # With a cap set, the month counts from then on.
    await world.execute("UPDATE workspaces SET monthly_dm_quota = 1")
    capped = await world.comment("zoe.lefevre")
    assert (await deliver(world.resources, worker_id="w", dm_log_id=capped.id)).private == "SENT"
    assert await _reserved(world) == 1
    over = await world.comment(await world.new_fan("li.wei"))
    assert (await deliver(world.resources, worker_id="w", dm_log_id=over.id)).private == (
        "SKIPPED_QUOTA"
    )


async def _reserved(world: World) -> int:
    async with autocommit(world.resources.engine) as conn:
        return (await quota.usage(conn, world.workspace_id)).reserved


async def test_quota_is_given_back_on_a_definite_rejection_and_kept_on_an_ambiguous_send(
    world: World,
) -> None:
    await world.execute("UPDATE workspaces SET monthly_dm_quota = 2")
    rejected = await world.comment("jane.doe")
    world.admin.add_fault("messages", "reject", code=551, times=1)
    report = await deliver(world.resources, worker_id="w", dm_log_id=rejected.id)
    assert report.private == "FAILED"
    assert await _reserved(world) == 0, "nothing was delivered: the DM goes back to the quota"

    # Delivered, then an error: Meta may well have sent it, so it stays counted.
    ambiguous = await world.comment("marco_rossi")
    world.admin.add_fault("messages", "deliver_then_error", code=1, times=1)
    report = await deliver(world.resources, worker_id="w", dm_log_id=ambiguous.id)
    assert report.private == "UNCONFIRMED"
    assert len(world.inbox("marco_rossi")) == 1
    assert await _reserved(world) == 1

    sent = await world.comment("olga.petrova")
    report = await deliver(world.resources, worker_id="w", dm_log_id=sent.id)
    assert report.private == "SENT"
    assert await _reserved(world) == 2

    over = await world.comment("zoe.lefevre")
    report = await deliver(world.resources, worker_id="w", dm_log_id=over.id)
    assert report.private == "SKIPPED_QUOTA"
    assert world.stats(over.trigger_id)["send_requests"] == 0
    assert await _reserved(world) == 2


@pytest.mark.parametrize(
    ("fault", "state", "kept"),
    [
        ({"action": "reject", "code": 551}, "FAILED", 0),
        ({"action": "reject", "code": 4}, "PENDING", 0),
        ({"action": "deliver_then_error", "code": 1}, "UNCONFIRMED", 1),
        ({"action": "deliver_then_reset"}, "UNCONFIRMED", 1),
        ({}, "SENT", 1),
    ],
    ids=[
        "final rejection",
        "rate limited",
        "code 1 after delivery",
        "reset after delivery",
        "sent",
    ],
)
async def test_the_hourly_slot_is_given_back_only_when_nothing_was_delivered(
    world: World, fault: dict[str, Any], state: str, kept: int
) -> None:
    budget = HourlyBudget(
        world.resources.redis, limit=world.resources.settings.private_replies_per_hour
    )
    row = await world.comment("jane.doe")
    if fault:
        world.admin.add_fault("messages", times=1, **fault)
    assert await budget.used(world.account_id) == 0
    report = await deliver(world.resources, worker_id="w", dm_log_id=row.id)
    assert report.private == state
    assert world.stats(row.trigger_id)["send_requests"] == 1
    # Meta counts a private reply it may have delivered against its hourly limit: so do we.
    assert await budget.used(world.account_id) == kept


async def test_public_reply_leg_is_independent(world: World) -> None:
    campaign = await world.campaign(
        name="With public reply",
        public_reply_after_dm=False,
        public_reply_enabled=True,
        public_replies=["Check your DMs 📩"],
    )
    row = await world.comment(campaign_id=campaign, public=True)
    world.admin.add_fault("messages", "reject", code=551)
    report = await deliver(world.resources, worker_id="w", dm_log_id=row.id)
    assert (report.public, report.private) == ("SENT", "FAILED")
    log = await world.log(row.id)
    assert log.pub_state is LegState.SENT
    assert log.pub_reply_id
    assert log.pub_text
    replies = world.admin.replies(comment_id=row.trigger_id)
    assert [r["text"] for r in replies] == ["Check your DMs 📩"]
    await deliver(world.resources, worker_id="w", dm_log_id=row.id)
    assert len(world.admin.replies(comment_id=row.trigger_id)) == 1


async def test_public_reply_failure_does_not_block_the_dm(world: World) -> None:
    campaign = await world.campaign(
        name="Public", public_reply_enabled=True, public_replies=["Sent!", "Check DMs"]
    )
    row = await world.comment(campaign_id=campaign, public=True)
    world.admin.add_fault("replies", "deliver_then_error", code=1, times=1)
    report = await deliver(world.resources, worker_id="w", dm_log_id=row.id)
    assert (report.public, report.private) == ("UNCONFIRMED", "SENT")


async def test_inactive_campaign_and_paused_account_skip(world: World) -> None:
    row = await world.comment()
    await world.execute("UPDATE campaigns SET status = 'paused'")
    report = await deliver(world.resources, worker_id="w", dm_log_id=row.id)
    assert report.private == "SKIPPED_CAMPAIGN_INACTIVE"
    await world.execute("UPDATE campaigns SET status = 'active'")
    await world.execute("UPDATE instagram_accounts SET status = 'paused'")
    other = await world.comment("marco_rossi")
    report = await deliver(world.resources, worker_id="w", dm_log_id=other.id)
    assert report.private == "SKIPPED_ACCOUNT_PAUSED"
    expired = await world.comment("olga.petrova", age=timedelta(days=8))
    await world.execute("UPDATE instagram_accounts SET status = 'active'")
    report = await deliver(world.resources, worker_id="w", dm_log_id=expired.id)
    assert report.private == "SKIPPED_WINDOW_EXPIRED"


async def test_of_a_batch_settled_by_racing_jobs_exactly_one_sees_none_left_in_flight(
    world: World,
) -> None:
    """Each job's stamp (a send answered) or give-back (a definite refusal) answers the slots
    still in flight, so the job that ends its batch knows it without another read
    (`pacer.batch_settled`): however the jobs interleave, exactly one of them sees 0."""
    budget = HourlyBudget(
        world.resources.redis, limit=50, window_s=60, grant_hold_s=30, in_flight_s=20
    )
    for _ in range(3):
        members = [f"g:{i}:{time.monotonic_ns()}" for i in range(12)]
        assert (await budget.grant(5, members, batch=12)).taken == 12
        assert await budget.in_flight(5) == 12

        async def settle(i: int, member: str) -> int:
            slot = Slot(5, member)
            confirmed = await budget.confirm(slot)
            assert confirmed == slot, confirmed
            # Every third send refused for good gives its slot back; the others are counted.
            return await (budget.release(slot) if i % 3 == 0 else budget.stamp(slot))

        left = await asyncio.gather(*(settle(i, m) for i, m in enumerate(members)))
        assert sorted(left) == list(range(12)), left
        assert await budget.in_flight(5) == 0
    # Given back: 4 of each batch; counted: 8 of each.
    assert await budget.used(5) == 24


async def test_a_give_back_on_a_lost_budget_answers_none_in_flight_and_rebuilds_nothing(
    world: World,
) -> None:
    redis: Redis = world.resources.redis
    budget = HourlyBudget(redis, limit=5, window_s=60)
    slot = await budget.reserve(9)
    assert isinstance(slot, Slot)
    await redis.flushdb()
    assert await budget.release(slot) == 0
    assert await redis.exists(budget_key(9)) == 0
