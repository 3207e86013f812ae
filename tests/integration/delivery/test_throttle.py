"""Adaptive throttling: Meta's usage headers slow an account's pacer before Meta refuses, a
rate-limit code pauses it, and both lapse by themselves; each change is an operational event."""

from __future__ import annotations

import asyncio
import dataclasses
import time

from sqlalchemy import select

from app.db.models import LegState, OperationalEvent
from app.delivery.send.dispatch import deliver
from app.delivery.send.pacer import pace_account
from app.delivery.send.throttle import MIN_SHARE, NORMAL, PAUSED, SLOWED, Throttle
from app.resources import Resources
from tests.integration.delivery.conftest import World

WINDOW_S = 60.0  # slowed for 5 s after a high-usage answer


def _paced(resources: Resources, cap: int) -> Resources:
    settings = dataclasses.replace(
        resources.settings, private_replies_per_hour=cap, private_reply_window_s=WINDOW_S
    )
    return dataclasses.replace(resources, settings=settings)


async def _events(world: World) -> list[str]:
    async with world.resources.sessionmaker() as session:
        rows = await session.scalars(
            select(OperationalEvent.kind)
            .where(OperationalEvent.source == "pacer")
            .order_by(OperationalEvent.id)
        )
        return list(rows)


async def _until_normal(throttle: Throttle, account_id: int) -> None:
    """Poll until the account's pace lapses back to normal (it does on its own)."""
    deadline = time.monotonic() + 60
    while (await throttle.current(account_id)).mode != NORMAL:
        if time.monotonic() > deadline:
            raise AssertionError("the account's pace never went back to normal")
        await asyncio.sleep(0.2)


async def test_high_usage_slows_the_pace_and_it_recovers_by_itself(world: World) -> None:
    resources = _paced(world.resources, 50)
    throttle = Throttle(resources.redis, window_s=WINDOW_S)
    # Meta's business-use-case usage grows with every private reply: at 8 of 10 it says 80 %.
    world.admin.update_settings(private_replies_per_hour=10)
    fans = [await world.new_fan(f"fan.{n}") for n in range(12)]
    rows = [await world.comment(fan) for fan in fans]
    for row in rows[:8]:
        assert (await deliver(resources, worker_id="w", dm_log_id=row.id)).private == "SENT"
    pace = await throttle.current(world.account_id)
    assert pace.mode == SLOWED
    assert pace.share < 1
    # In a backlog the pacer hands out one slot at a time, although 42 are free.
    await world.execute("UPDATE instagram_accounts SET pr_backlog_since = now()")
    assert (await deliver(resources, worker_id="w", dm_log_id=rows[8].id)).private == (
        "waiting for budget"
    )
    slowed = await pace_account(resources, world.account_id)
    assert (slowed.pace, slowed.granted) == (SLOWED, 1)
    assert slowed.next_run_in_s is not None
    assert slowed.next_run_in_s > 0
    assert await _events(world) == ["pace_slowed"]

    world.admin.update_settings(private_replies_per_hour=100_000)
    await _until_normal(throttle, world.account_id)
    resumed = await pace_account(resources, world.account_id)
    assert (resumed.pace, resumed.granted) == (NORMAL, 3)
    assert await _events(world) == ["pace_slowed", "pace_resumed"]


async def test_a_rate_limit_with_a_stated_wait_pauses_every_send_of_the_account(
    world: World,
) -> None:
    resources = _paced(world.resources, 50)
    throttle = Throttle(resources.redis, window_s=WINDOW_S)
    # Meta's own hourly limit, reached: 613 with `estimated_time_to_regain_access` in minutes.
    world.admin.update_settings(private_replies_per_hour=2)
    fans = [await world.new_fan(f"fan.{n}") for n in range(5)]
    rows = [await world.comment(fan) for fan in fans]
    for row in rows[:2]:
        assert (await deliver(resources, worker_id="w", dm_log_id=row.id)).private == "SENT"
    assert (await deliver(resources, worker_id="w", dm_log_id=rows[2].id)).private == "PENDING"
    log = await world.log(rows[2].id)
    assert (log.pr_state, log.pr_error_code) == (LegState.PENDING, 613)
    pace = await throttle.current(world.account_id)
    assert pace.mode == PAUSED
    assert 30 < pace.remaining_s <= 3600
    # No job takes a slot while Meta asked to wait: the comment waits for the pacer...
    assert (await deliver(resources, worker_id="w", dm_log_id=rows[3].id)).private == (
        "waiting for budget"
    )
    # ...which hands out nothing and looks again when the pause is over.
    paused = await pace_account(resources, world.account_id)
    assert (paused.pace, paused.granted) == (PAUSED, 0)
    assert paused.next_run_in_s is not None
    assert abs(paused.next_run_in_s - pace.remaining_s) < 30
    assert await _events(world) == ["pace_paused"]
    assert world.stats(rows[3].trigger_id)["send_requests"] == 0


async def test_a_rate_limit_with_no_stated_wait_slows_the_pace_to_the_least(
    world: World,
) -> None:
    resources = _paced(world.resources, 50)
    throttle = Throttle(resources.redis, window_s=WINDOW_S)
    fans = [await world.new_fan(f"fan.{n}") for n in range(4)]
    rows = [await world.comment(fan) for fan in fans]
    world.admin.add_fault("messages", "reject", code=4, times=1)
    assert (await deliver(resources, worker_id="w", dm_log_id=rows[0].id)).private == "PENDING"
    pace = await throttle.current(world.account_id)
    assert (pace.mode, pace.share) == (SLOWED, MIN_SHARE)
    await _until_normal(throttle, world.account_id)
    assert (await deliver(resources, worker_id="w", dm_log_id=rows[1].id)).private == "SENT"
