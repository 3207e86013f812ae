"""Adaptive throttling: Meta's usage headers slow an account's pacer before Meta refuses, a
rate-limit code pauses it, and both lapse by themselves; each change is an operational event,
recorded once. While slowed, every send of the account goes through its pacer at the slowed
share, and a send refused for the account's pace waits for the pacer again, earliest deadline
first. The pacer runs as the worker runs it (`pacing`)."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import time
from datetime import timedelta

from sqlalchemy import select

from app.db.models import AttemptClass, LegState, OperationalEvent
from app.delivery.send.budget import PACE_KEY, batch_size, grant_stamp
from app.delivery.send.budget_history import account_budget
from app.delivery.send.dispatch import deliver
from app.delivery.send.pacer import pace_account
from app.delivery.send.scheduling import kick_pacer
from app.delivery.send.throttle import (
    MIN_SHARE,
    NORMAL,
    PAUSED,
    REFUSAL_HOLD_MIN_S,
    SLOWED,
    Throttle,
)
from app.instagram.graph import Usage
from app.resources import Resources
from tests.integration.delivery.conftest import World
from tests.integration.delivery.pacing import run_pacer, run_pacer_until

WINDOW_S = 60.0  # slowed for 5 s after a high-usage answer


def _paced(resources: Resources, cap: int, window_s: float = WINDOW_S) -> Resources:
    settings = dataclasses.replace(
        resources.settings, private_replies_per_hour=cap, private_reply_window_s=window_s
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
    resources = _paced(world.resources, 20)  # a 3 s step while slowed
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
    # Recorded by the send that saw it: in a short window it may lapse before the pacer runs.
    assert await _events(world) == ["pace_slowed"]
    # Slowed, no job takes a slot of its own: the next comment waits for the pacer, which
    # hands out one slot at a time, although 12 are free, however often it is woken.
    assert (await deliver(resources, worker_id="w", dm_log_id=rows[8].id)).private == (
        "waiting for budget"
    )
    slowed = await pace_account(resources, world.account_id)
    assert (slowed.pace, slowed.granted) == (SLOWED, 1)
    assert slowed.next_run_in_s is not None
    assert slowed.next_run_in_s > 0
    woken = await pace_account(resources, world.account_id)
    assert (woken.pace, woken.granted) == (SLOWED, 0)
    assert await _events(world) == ["pace_slowed"]

    world.admin.update_settings(private_replies_per_hour=100_000)
    await _until_normal(throttle, world.account_id)
    # The slot granted while slowed is in flight until its send: then the pacer, back at the
    # usual pace, grants a whole batch.
    assert (await pace_account(resources, world.account_id)).granted == 0
    [granted] = [r for r in rows[8:] if (await world.log(r.id)).pr_granted_at is not None]
    granted_at = (await world.log(granted.id)).pr_granted_at
    assert granted_at is not None
    sent = await deliver(
        resources, worker_id="w", dm_log_id=granted.id, grant=grant_stamp(granted_at)
    )
    assert sent.private == "SENT"
    resumed = await pace_account(resources, world.account_id)
    assert resumed.pace == NORMAL
    waiting = [r for r in rows[8:] if r.id != granted.id]
    now_granted = [r for r in waiting if (await world.log(r.id)).pr_granted_at is not None]
    assert len(now_granted) == batch_size(20)
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
    # Usage at 100 %: slowed before Meta refuses, the next comment goes through the pacer...
    assert (await throttle.current(world.account_id)).mode == SLOWED
    assert (await deliver(resources, worker_id="w", dm_log_id=rows[2].id)).private == (
        "waiting for budget"
    )
    # ...and Meta refuses it all the same, stating when access returns.
    run = await run_pacer(resources)
    assert sum(p.granted for p in run.paced) == 1
    assert [(i, r.private) for i, r in run.delivered] == [(rows[2].id, "PENDING")]
    log = await world.log(rows[2].id)
    assert (log.pr_state, log.pr_error_code, log.pr_attempts) == (LegState.PENDING, 613, 0)
    assert log.pr_granted_at is None
    pace = await throttle.current(world.account_id)
    assert pace.mode == PAUSED
    assert 30 < pace.remaining_s <= 3600
    # Not before Meta said: the row waits for the pacer past the stated time.
    assert log.pr_next_attempt_at is not None
    assert abs((log.pr_next_attempt_at - log.updated_at).total_seconds() - pace.remaining_s) < 30
    # No job takes a slot while Meta asked to wait: the comment waits for the pacer...
    assert (await deliver(resources, worker_id="w", dm_log_id=rows[3].id)).private == (
        "waiting for budget"
    )
    # ...which hands out nothing and looks again when the pause is over.
    paused = await pace_account(resources, world.account_id)
    assert (paused.pace, paused.granted) == (PAUSED, 0)
    assert paused.next_run_in_s is not None
    assert abs(paused.next_run_in_s - pace.remaining_s) < 30
    assert await _events(world) == ["pace_slowed", "pace_paused"]
    assert world.stats(rows[3].trigger_id)["send_requests"] == 0

    # The pause runs out (its time made to pass, here) and Meta allows sends again: the
    # pacer's next run resumes the usual pace, and the comments go oldest first.
    world.admin.update_settings(private_replies_per_hour=100_000)
    await resources.redis.pexpire(PACE_KEY.format(account_id=world.account_id), 1)
    await world.execute(
        "UPDATE dm_logs SET pr_next_attempt_at = now() WHERE id = :id", id=rows[2].id
    )
    await _until_normal(throttle, world.account_id)
    await kick_pacer(resources.queue, [world.account_id])
    run = await run_pacer(resources)
    assert {p.pace for p in run.paced} == {NORMAL}
    # A batch at a time: the last send of one grants the next.
    assert run.paced[0].granted == batch_size(50)
    assert [(i, r.private) for i, r in run.delivered] == [(r.id, "SENT") for r in rows[2:]]
    assert await _events(world) == ["pace_slowed", "pace_paused", "pace_resumed"]


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
    # Held at least 30 s, however short the budget's window: Meta's limits do not shrink.
    assert REFUSAL_HOLD_MIN_S - 5 < pace.remaining_s <= REFUSAL_HOLD_MIN_S
    # Recorded at once: in a short window the slow-down may lapse before the pacer runs.
    assert await _events(world) == ["pace_slowed"]
    # The refused comment waits for the pacer, which the send woke: one grant a step, oldest
    # first, so it goes before the comments that came after it.
    run = await run_pacer(resources)
    assert {p.pace for p in run.paced} == {SLOWED}
    assert sum(p.granted for p in run.paced) == 1
    assert [(i, r.private) for i, r in run.delivered] == [(rows[0].id, "SENT")]
    log = await world.log(rows[0].id)
    assert (log.pr_state, log.pr_attempts) == (LegState.SENT, 1)
    assert world.stats(rows[0].trigger_id)["send_requests"] == 2
    assert await _events(world) == ["pace_slowed"]


async def test_a_code_4_mid_backlog_holds_rows_back_then_sends_them_in_deadline_order(
    world: World,
) -> None:
    """Meta's per-second limit reached in the middle of a backlog: the refused rows wait for
    the pacer, with their attempts given back, and go out later, oldest comment first, each
    once; the pacer, slowed, grants one row a step whoever wakes it."""
    resources = _paced(world.resources, 50, window_s=10.0)
    fans = [await world.new_fan(f"fan.{n}") for n in range(8)]
    # Made newest first, so id order and deadline order disagree.
    rows = [await world.comment(fan, age=timedelta(hours=n)) for n, fan in enumerate(fans)]
    by_deadline = sorted(rows, key=lambda r: (r.deadline_at, r.id))
    # Meta's per-second limit, and (so that a refusal comes whatever the machine's speed) the
    # third comment's send refused with code 4 once.
    world.admin.update_settings(sends_per_second=2)
    world.admin.add_fault(
        "messages", "reject", code=4, comment_id=by_deadline[2].trigger_id, times=1
    )
    await world.execute("UPDATE instagram_accounts SET pr_backlog_since = now()")
    await kick_pacer(resources.queue, [world.account_id])

    async def all_final() -> bool:
        states = [(await world.log(r.id)).pr_state for r in rows]
        return LegState.PENDING not in states

    runs = await run_pacer_until(resources, all_final)
    assert runs[0].paced[0].pace == NORMAL
    assert runs[0].paced[0].granted == batch_size(50)
    # Every row final and sent exactly once.
    for row in rows:
        log = await world.log(row.id)
        assert (log.pr_state, log.pr_attempts) == (LegState.SENT, 1)
        assert world.stats(row.trigger_id)["private_replies_delivered"] == 1
    refused = {
        row.id
        for row in rows
        for attempt in await world.attempts(row.id)
        if attempt.classification is AttemptClass.RETRYABLE and attempt.meta_code == 4
    }
    assert by_deadline[2].id in refused
    # Once slowed, the pacer granted at most one row a run.
    slowed = [p for run in runs for p in run.paced if p.pace == SLOWED]
    assert slowed
    assert max(p.granted for p in slowed) == 1
    # Each change recorded once (a refusal while slowed changes nothing).
    events = await _events(world)
    assert events[0] == "pace_slowed"
    assert all(a != b for a, b in itertools.pairwise(events))
    # The rows held back went out later, in deadline order.
    sent_order = [
        m["comment_id"]
        for m in sorted(world.admin.messages(account="sunny.bakes"), key=lambda m: m["time"])
        if m.get("comment_id")
    ]
    held_back = [r.trigger_id for r in by_deadline if r.id in refused]
    assert [c for c in sent_order if c in held_back] == held_back
    assert sorted(sent_order) == sorted(r.trigger_id for r in rows)


async def test_racing_notes_of_one_change_see_it_once_and_the_budget_reads_the_same_pace(
    world: World,
) -> None:
    """`Throttle.note` reads the pace and remembers it in one script: of many runs noting the
    same change at once, exactly one sees it (and records its event); the budget's `free`
    reads the same mode in its own script (`ingest.pace_surges`)."""
    resources = _paced(world.resources, 60)
    throttle = Throttle(resources.redis, window_s=WINDOW_S)
    budget = account_budget(resources)
    account_id = world.account_id
    pace, previous = await throttle.note(account_id)
    assert (pace.mode, pace.share, pace.remaining_s, previous) == (NORMAL, 1.0, 0.0, None)
    assert (await budget.free(account_id)).pace_mode == NORMAL

    assert await throttle.observe(account_id, Usage(), code=4) is not None
    noted = await asyncio.gather(*(throttle.note(account_id) for _ in range(20)))
    assert {p.mode for p, _ in noted} == {SLOWED}
    assert all(p.share == MIN_SHARE and 0 < p.remaining_s <= REFUSAL_HOLD_MIN_S for p, _ in noted)
    assert [before for _, before in noted if before is not None] == [NORMAL]
    assert (await budget.free(account_id)).pace_mode == SLOWED

    paused = Usage(business={"1": [{"estimated_time_to_regain_access": 1}]})
    assert await throttle.observe(account_id, paused, code=4) is not None
    noted = await asyncio.gather(*(throttle.note(account_id) for _ in range(20)))
    assert [before for _, before in noted if before is not None] == [SLOWED]
    assert all(p.mode == PAUSED and 0 < p.remaining_s <= 60 for p, _ in noted)
    assert (await budget.free(account_id)).pace_mode == PAUSED

    await resources.redis.delete(PACE_KEY.format(account_id=account_id))
    pace, previous = await throttle.note(account_id)
    assert (pace.mode, previous) == (NORMAL, PAUSED)
    assert (await throttle.note(account_id))[1] is None
    assert (await budget.free(account_id)).pace_mode == NORMAL


async def test_the_pacers_look_notes_the_pace_once_and_steps_only_while_slowed(
    world: World,
) -> None:
    """`HourlyBudget.look` (the pacer's one script: the pace, noted, and the free slots):
    racing `Throttle.note`s and looks see one change once between them, and the slowed
    pace's step holds the grants back only while the account is slowed."""
    resources = _paced(world.resources, 60)
    throttle = Throttle(resources.redis, window_s=WINDOW_S)
    budget = account_budget(resources)
    account_id = world.account_id
    look = await budget.look(account_id, batch=5, step_s=10)
    assert (look.mode, look.share, look.remaining_s, look.previous) == (NORMAL, 1.0, 0.0, None)
    assert (look.free.free, look.free.pace_mode) == (60, NORMAL)

    assert await throttle.observe(account_id, Usage(), code=4) is not None
    seen = await asyncio.gather(
        *(throttle.note(account_id) for _ in range(10)),
        *(budget.look(account_id, batch=5, step_s=10) for _ in range(10)),
    )
    previous = [s[1] if isinstance(s, tuple) else s.previous for s in seen]
    assert [p for p in previous if p is not None] == [NORMAL], previous
    # Slowed: a grant starts the step, and until it ends the look finds nothing to grant.
    assert (await budget.grant(account_id, ["g:1:1"], batch=5, step_s=10)).taken == 1
    slowed = await budget.look(account_id, batch=5, step_s=10)
    assert (slowed.mode, slowed.share, slowed.previous) == (SLOWED, MIN_SHARE, None)
    assert slowed.free.free == 0, slowed
    assert 0 < slowed.free.next_free_s <= 10, slowed
    # Back to normal (the pace lapsed, its step with it): every free slot is grantable.
    await resources.redis.delete(PACE_KEY.format(account_id=account_id))
    normal = await budget.look(account_id, batch=5, step_s=10)
    assert (normal.mode, normal.previous) == (NORMAL, SLOWED)
    assert (normal.free.free, normal.free.next_free_s) == (59, 0.0), normal
