"""The per-account pacer: a backlog drains through the hourly budget earliest deadline first,
holding no job per waiting row, never past the cap — also across a loss of Redis's data and
with several worker processes racing."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path

from sqlalchemy import text

from app.db.engine import autocommit
from app.db.models import DmLog, LegState
from app.delivery.recovery import sweeps
from app.delivery.send.budget import GRANT_TTL_S, HourlyBudget, Slot, batch_size, grant_stamp
from app.delivery.send.budget_history import account_budget
from app.delivery.send.dispatch import deliver
from app.delivery.send.pacer import (
    _TURN_KEY,
    MISSED_REASON,
    TURN_LEASE_S,
    WAITING_REASON,
    pace_account,
)
from app.delivery.send.scheduling import enqueue_delivery, kick_pacer
from app.resources import Resources
from tests.integration.delivery.conftest import World
from tests.integration.delivery.pacing import run_pacer_until, until_request_left
from tests.support import infra
from tests.support.processes import start_worker
from tests.support.webhooks import pending_keys, queued_keys


def _with_cap(resources: Resources, cap: int, window_s: float = 3600.0) -> Resources:
    settings = dataclasses.replace(
        resources.settings, private_replies_per_hour=cap, private_reply_window_s=window_s
    )
    return dataclasses.replace(resources, settings=settings)


async def _fill(resources: Resources, account_id: int, count: int) -> None:
    """`count` sends answered a moment ago hold their slots."""
    budget = account_budget(resources)
    for _ in range(count):
        slot = await budget.reserve(account_id)
        assert isinstance(slot, Slot), slot
        await budget.stamp(slot)


async def _backlog_since(world: World) -> object:
    async with autocommit(world.resources.engine) as conn:
        return (
            await conn.execute(
                text("SELECT pr_backlog_since FROM instagram_accounts WHERE id = :id"),
                {"id": world.account_id},
            )
        ).scalar()


async def _deliver_granted(resources: Resources, world: World, rows: list[DmLog]) -> None:
    """Run the jobs the pacer enqueued, as a worker would (each with its grant)."""
    for row in rows:
        log = await world.log(row.id)
        assert log.pr_granted_at is not None, f"row {row.id} was not granted"
        report = await deliver(
            resources, worker_id="w", dm_log_id=row.id, grant=grant_stamp(log.pr_granted_at)
        )
        assert report.private == "SENT", report


async def _drain_grants(
    resources: Resources, world: World, rows: list[DmLog], *, order: list[DmLog] | None = None
) -> None:
    """Send each batch the pacer grants (the last send of one grants the next) until no row
    of `rows` holds a grant, each batch in `order` when given."""
    for _ in range(len(rows)):
        granted = [
            r
            for r in rows
            if (log := await world.log(r.id)).pr_state is LegState.PENDING
            and log.pr_granted_at is not None
        ]
        if not granted:
            return
        if order is not None:
            granted.sort(key=order.index)
        await _deliver_granted(resources, world, granted)


async def test_a_full_budget_leaves_the_comment_to_the_pacer_without_a_job(world: World) -> None:
    resources = world.resources
    await _fill(resources, world.account_id, resources.settings.private_replies_per_hour)
    waiting = await world.comment("jane.doe")
    report = await deliver(resources, worker_id="w", dm_log_id=waiting.id)
    assert report.private == "waiting for budget"
    log = await world.log(waiting.id)
    assert (log.pr_state, log.pr_attempts, log.pr_next_attempt_at) == (LegState.PENDING, 0, None)
    assert log.pr_error_message == WAITING_REASON
    assert await _backlog_since(world) is not None
    keys = await pending_keys(resources)
    assert not [k for k in keys if k.startswith("deliver:")], "the row holds no job of its own"
    assert [k for k in keys if k.startswith(f"pace:{world.account_id}:")], keys
    # A comment whose 7-day window closes before a slot frees is not kept waiting.
    late = await world.comment("marco_rossi", age=timedelta(days=6, hours=23, minutes=30))
    await world.execute("UPDATE instagram_accounts SET pr_backlog_since = NULL")
    report = await deliver(resources, worker_id="w", dm_log_id=late.id)
    assert report.private == "SKIPPED_WINDOW_EXPIRED"
    assert (await world.log(late.id)).pr_error_message == MISSED_REASON
    assert world.stats(waiting.trigger_id)["send_requests"] == 0


async def test_the_pacer_hands_out_exactly_the_free_slots_oldest_comment_first(
    world: World,
) -> None:
    # A batch of 3 at a cap of 150, with 3 slots free.
    resources = _with_cap(world.resources, 150)
    assert batch_size(150) == 3
    fans = [await world.new_fan(f"fan.{n}") for n in range(6)]
    # Made newest first, so id order and deadline order disagree.
    rows = [await world.comment(fan, age=timedelta(hours=n)) for n, fan in enumerate(fans)]
    await _fill(resources, world.account_id, 147)
    await world.execute("UPDATE instagram_accounts SET pr_backlog_since = now()")
    # A job that meets a row of an account with a backlog leaves it to the pacer.
    report = await deliver(resources, worker_id="w", dm_log_id=rows[0].id)
    assert report.private == "waiting for budget"

    paced = await pace_account(resources, world.account_id)
    assert paced.granted == 3
    oldest = sorted(rows, key=lambda r: r.deadline_at or r.created_at)[:3]
    granted = [r for r in rows if (await world.log(r.id)).pr_granted_at is not None]
    assert {r.id for r in granted} == {r.id for r in oldest}
    deliveries = [k for k in await queued_keys(resources) if k.startswith("deliver:")]
    expected = []
    for row in granted:
        granted_at = (await world.log(row.id)).pr_granted_at
        assert granted_at is not None
        expected.append(f"deliver:{row.id}:g{grant_stamp(granted_at)}")
    assert sorted(deliveries) == sorted(expected)
    # A second pacer run finds the budget full: it grants nothing more, and runs again later.
    again = await pace_account(resources, world.account_id)
    assert (again.granted, again.missed) == (0, 0)
    assert again.next_run_in_s is not None
    assert again.next_run_in_s > 3000

    # A job that is not the grant's does nothing; the grant's job sends.
    report = await deliver(resources, worker_id="w", dm_log_id=oldest[0].id)
    assert report.private == "granted to the pacer's job"
    await _deliver_granted(resources, world, oldest)
    assert await account_budget(resources).used(world.account_id) == 150
    for row in rows:
        expected = 1 if row in oldest else 0
        assert world.stats(row.trigger_id)["send_requests"] == expected


async def test_a_grant_holds_its_slot_while_its_job_waits_longer_than_the_window(
    world: World,
) -> None:
    """A busy queue may hold a granted row's job for longer than the budget's window. Its
    slot is still its own then: the pacer grants it to no newer row, so the older comment is
    not overtaken (and granted again and again while its job waits)."""
    window_s = 1.0
    resources = _with_cap(world.resources, 1, window_s=window_s)
    fans = [await world.new_fan(f"queue.fan{n}") for n in range(2)]
    # Oldest first: the first is granted, the second waits.
    rows = [await world.comment(fan, age=timedelta(minutes=3 - n)) for n, fan in enumerate(fans)]
    await world.execute("UPDATE instagram_accounts SET pr_backlog_since = now()")
    assert (await pace_account(resources, world.account_id)).granted == 1
    # The grant's job is still queued one and a half windows later.
    await asyncio.sleep(window_s * 1.5)
    again = await pace_account(resources, world.account_id)
    assert again.granted == 0, "a queued grant's slot was handed to a newer comment"
    assert (await world.log(rows[1].id)).pr_granted_at is None
    await _deliver_granted(resources, world, rows[:1])
    # Once that send has aged out of the window, the second gets its slot.
    await asyncio.sleep(window_s * 1.2)
    assert (await pace_account(resources, world.account_id)).granted == 1
    await _deliver_granted(resources, world, rows[1:])
    sent = sorted((m["time"], m["comment_id"]) for m in world.admin.messages() if m["comment_id"])
    assert [comment for _, comment in sent] == [row.trigger_id for row in rows]


async def test_a_granted_job_that_does_not_send_gives_its_slot_back(world: World) -> None:
    """A grant holds its slot until its job runs; a job that finds nothing to send (its row
    was settled meanwhile) gives the slot back at once."""
    resources = _with_cap(world.resources, 1)
    row = await world.comment("jane.doe")
    await world.execute("UPDATE instagram_accounts SET pr_backlog_since = now()")
    assert (await pace_account(resources, world.account_id)).granted == 1
    budget = account_budget(resources)
    assert await budget.used(world.account_id) == 1
    granted_at = (await world.log(row.id)).pr_granted_at
    assert granted_at is not None
    await world.execute(
        "UPDATE dm_logs SET pr_state = 'SKIPPED_DEDUP', pub_state = NULL WHERE id = :id", id=row.id
    )
    report = await deliver(
        resources, worker_id="w", dm_log_id=row.id, grant=grant_stamp(granted_at)
    )
    assert report.private is None, report
    assert await budget.used(world.account_id) == 0
    assert world.stats(row.trigger_id)["send_requests"] == 0


async def test_a_waiting_comment_that_cannot_make_its_window_is_skipped(world: World) -> None:
    resources = _with_cap(world.resources, 2)
    doomed = await world.comment("jane.doe", age=timedelta(days=6, hours=23, minutes=30))
    fine = await world.comment("marco_rossi", age=timedelta(days=1))
    await _fill(resources, world.account_id, 2)
    await world.execute("UPDATE instagram_accounts SET pr_backlog_since = now()")
    paced = await pace_account(resources, world.account_id)
    assert (paced.granted, paced.missed) == (0, 1)
    log = await world.log(doomed.id)
    assert log.pr_state is LegState.SKIPPED_WINDOW_EXPIRED
    assert log.pr_error_message == MISSED_REASON
    assert (await world.log(fine.id)).pr_state is LegState.PENDING
    assert world.stats(doomed.trigger_id)["send_requests"] == 0


async def test_losing_redis_mid_backlog_neither_exceeds_the_cap_nor_loses_a_row(
    world: World, test_redis: infra.TestRedis
) -> None:
    resources = _with_cap(world.resources, 6)
    fans = [await world.new_fan(f"fan.{n}") for n in range(9)]
    rows = [await world.comment(fan) for fan in fans]
    reports = [await deliver(resources, worker_id="w", dm_log_id=r.id) for r in rows[:5]]
    assert [r.private for r in reports] == ["SENT"] * 5
    await world.execute("UPDATE instagram_accounts SET pr_backlog_since = now()")
    # The pacer grants the last free slot: that row's job is queued when Redis loses
    # everything.
    assert (await pace_account(resources, world.account_id)).granted == 1
    granted = [r for r in rows if (await world.log(r.id)).pr_granted_at is not None]
    assert len(granted) == 1
    [held] = granted
    held_at = (await world.log(held.id)).pr_granted_at
    assert held_at is not None

    test_redis.flush()  # a restart of a Redis that keeps nothing on disk

    # The budget is rebuilt from PostgreSQL: five sends and the grant (given up, its job was
    # in the lost queue) hold all six slots.
    paced = await pace_account(resources, world.account_id)
    assert paced.granted == 0
    budget = account_budget(resources)
    assert await budget.used(world.account_id) == 6
    assert (await world.log(held.id)).pr_granted_at is None
    # The relay notices the account's backlog and restarts its pacer (its job was lost too).
    async with autocommit(resources.engine) as conn:
        relayed = await sweeps.relay_due_work(conn, resources.queue, grace_s=0)
    assert relayed.paced_accounts == 1
    assert [k for k in await pending_keys(resources) if k.startswith("pace:")]
    # Had a worker taken the grant's job before the restart, it sends nothing now, gives the
    # slot back and leaves the row to the pacer (which that job's end runs), which grants it
    # again, first in line.
    report = await deliver(resources, worker_id="w", dm_log_id=held.id, grant=grant_stamp(held_at))
    assert report.private == "waiting for budget"
    assert world.stats(held.trigger_id)["send_requests"] == 0
    await pace_account(resources, world.account_id)
    regranted = [r for r in rows if (await world.log(r.id)).pr_granted_at is not None]
    assert regranted == [held]
    assert await budget.used(world.account_id) == 6
    await _deliver_granted(resources, world, [held])
    assert await budget.used(world.account_id) == 6

    # Nothing is lost: with room again (a higher cap stands in for the hour passing), the
    # pacer hands out the rest, a batch at a time (the last send of one grants the next), and
    # every fan gets exactly one message.
    roomy = _with_cap(world.resources, 9)
    assert (await pace_account(roomy, world.account_id)).granted == batch_size(9)
    await _drain_grants(roomy, world, rows)
    assert await _backlog_since(world) is None, "nothing is left waiting: the backlog is over"
    for row in rows:
        assert (await world.log(row.id)).pr_state is LegState.SENT
        assert world.stats(row.trigger_id)["send_requests"] == 1


async def test_after_losing_redis_a_backlog_resumes_at_once_in_deadline_order(
    world: World, test_redis: infra.TestRedis
) -> None:
    """Redis restarts empty while a batch's grants wait in the queue: their jobs are lost
    with it. The budget rebuilt from PostgreSQL counts those grants' slots as used (the cap
    holds whatever became of their jobs), not as in flight for the rest of the grants' hold,
    and gives the grants up: the pacer grants the next batch at once, the rows it gave up
    first (earliest deadline), and every comment gets exactly one reply."""
    resources = _with_cap(world.resources, 150)  # a batch of 3
    batch = batch_size(150)
    fans = [await world.new_fan(f"restart.fan{n}") for n in range(8)]
    # Made newest first, so id order and deadline order disagree.
    rows = [await world.comment(fan, age=timedelta(hours=n)) for n, fan in enumerate(fans)]
    by_deadline = sorted(rows, key=lambda r: (r.deadline_at, r.id))
    await world.execute("UPDATE instagram_accounts SET pr_backlog_since = now()")
    assert (await pace_account(resources, world.account_id)).granted == batch
    lost = {}
    for row in by_deadline[:batch]:
        granted_at = (await world.log(row.id)).pr_granted_at
        assert granted_at is not None
        lost[row.id] = grant_stamp(granted_at)
    # The first of the batch is sent; the other two jobs are still queued when Redis restarts.
    await _deliver_granted(resources, world, by_deadline[:1])

    test_redis.flush()  # a restart of a Redis that keeps nothing on disk

    paced = await pace_account(resources, world.account_id)
    assert paced.granted == batch, "the backlog stood still after the restart"
    regranted = [r for r in rows if (await world.log(r.id)).pr_granted_at is not None]
    assert {r.id for r in regranted} == {r.id for r in by_deadline[1 : 1 + batch]}
    # The cap counts the sent reply, the two grants given up and the batch just granted.
    budget = account_budget(resources)
    assert await budget.used(world.account_id) == 1 + (batch - 1) + batch
    # A job of a grant given up (taken by a worker just before the restart) sends nothing,
    # and gives its slot back.
    survivor = by_deadline[1]
    report = await deliver(resources, worker_id="w", dm_log_id=survivor.id, grant=lost[survivor.id])
    assert report.private == "granted to the pacer's job"
    assert await budget.used(world.account_id) == 1 + (batch - 2) + batch
    assert world.stats(survivor.trigger_id)["send_requests"] == 0

    # Then the backlog drains, a batch at a time, each comment answered once, oldest first.
    await _drain_grants(resources, world, rows, order=by_deadline)
    for row in rows:
        assert (await world.log(row.id)).pr_state is LegState.SENT
        assert world.stats(row.trigger_id)["send_requests"] == 1
    sent = sorted((m["time"], m["comment_id"]) for m in world.admin.messages() if m["comment_id"])
    assert [comment for _, comment in sent] == [row.trigger_id for row in by_deadline]


async def _until_all_final(
    world: World,
    rows: list[DmLog],
    *,
    stall_s: float,
    progress: Callable[[int], Awaitable[None]] | None = None,
) -> list[LegState]:
    """Wait until every row is final; fail only when none settles for `stall_s` (the workers
    stopped making progress), however slow a busy machine makes each one."""
    settled, since = -1, time.monotonic()
    while True:
        states = [(await world.log(r.id)).pr_state for r in rows]
        done = sum(1 for state in states if state.is_final)
        if done == len(rows):
            return states
        if done != settled:
            settled, since = done, time.monotonic()
            if progress:
                await progress(done)
        elif time.monotonic() - since > stall_s:
            raise AssertionError(f"no row settled for {stall_s:g} s: {states}")
        await asyncio.sleep(0.5)


def _most_in_window(world: World, window_s: float) -> tuple[int, int]:
    """(private replies the sandbox received, the most of them within any `window_s`)."""
    times = sorted(m["time"] for m in world.admin.messages() if m["comment_id"])
    most = max(sum(1 for t in times if start <= t < start + window_s) for start in times)
    return len(times), most


async def test_several_workers_drain_a_backlog_within_the_cap_and_finish_every_row(
    world: World, delivery_env: dict[str, str], artifacts_dir: Path
) -> None:
    cap, window_s = 4, 3.0
    env = {
        **delivery_env,
        "PRIVATE_REPLIES_PER_HOUR": str(cap),
        "PRIVATE_REPLY_WINDOW_S": str(window_s),
    }
    fans = [await world.new_fan(f"wave.fan{n}") for n in range(24)]
    rows = [await world.comment(fan) for fan in fans]
    workers = [start_worker(env, artifacts_dir, f"pacer-worker-{n}") for n in range(3)]
    try:
        for row in rows:
            await enqueue_delivery(world.resources.queue, row.id)
        states = await _until_all_final(world, rows, stall_s=60)
    finally:
        for worker in workers:
            worker.stop()
    assert all(state is LegState.SENT for state in states), states
    sent, most = _most_in_window(world, window_s)
    assert sent == len(rows), "exactly one private reply per comment"
    assert most <= cap, f"{most} private replies within {window_s} s; the cap is {cap}"
    for row in rows:
        assert world.stats(row.trigger_id)["private_replies_delivered"] == 1


async def test_two_workers_drain_a_backlog_in_deadline_order_to_within_one_batch(
    world: World, delivery_env: dict[str, str], artifacts_dir: Path
) -> None:
    """Two worker processes, each running many jobs at once, drain an account's backlog: one
    batch is in flight at a time, so no comment is overtaken by more than one batch of
    comments made after it (as the sandbox received the replies)."""
    cap = 150  # a batch of 3; the budget itself never fills here
    batch = batch_size(cap)
    assert batch == 3
    env = {**delivery_env, "PRIVATE_REPLIES_PER_HOUR": str(cap)}
    fans = [await world.new_fan(f"order.fan{n}") for n in range(30)]
    # Made newest first, so id order and deadline order disagree.
    rows = [await world.comment(fan, age=timedelta(minutes=n)) for n, fan in enumerate(fans)]
    await world.execute("UPDATE instagram_accounts SET pr_backlog_since = now()")
    workers = [start_worker(env, artifacts_dir, f"order-worker-{n}") for n in range(2)]
    try:
        await kick_pacer(world.resources.queue, [world.account_id])
        states = await _until_all_final(world, rows, stall_s=60)
    finally:
        for worker in workers:
            worker.stop()
    assert all(state is LegState.SENT for state in states), states
    received = {m["comment_id"]: m["time"] for m in world.admin.messages() if m["comment_id"]}
    assert len(received) == len(rows)
    made = {row.trigger_id: row.deadline_at for row in rows}
    overtaken = {
        comment: sum(
            1
            for other, other_at in received.items()
            if made[other] > made[comment] and other_at < at
        )
        for comment, at in received.items()
    }
    assert max(overtaken.values()) <= batch, sorted(overtaken.values())


async def test_several_workers_losing_redis_mid_backlog_keep_the_cap_and_every_row(
    world: World, delivery_env: dict[str, str], artifacts_dir: Path, test_redis: infra.TestRedis
) -> None:
    """Redis restarts empty while three workers drain a backlog: its budget, its queue and
    its pacers' jobs are gone, and comments keep coming. The budget is rebuilt from
    PostgreSQL, so the sandbox never receives more than the cap within a window; the relay
    restarts the pacer, and every comment still gets exactly one private reply."""
    cap, window_s = 4, 10.0
    env = {
        **delivery_env,
        "PRIVATE_REPLIES_PER_HOUR": str(cap),
        "PRIVATE_REPLY_WINDOW_S": str(window_s),
    }
    fans = [await world.new_fan(f"flush.fan{n}") for n in range(16)]
    rows = [await world.comment(fan) for fan in fans]
    late = [await world.comment(await world.new_fan(f"late.fan{n}")) for n in range(cap)]
    workers = [start_worker(env, artifacts_dir, f"flush-worker-{n}") for n in range(3)]
    flushed_at: list[int] = []

    async def flush_mid_backlog(done: int) -> None:
        # Just after the second window's sends: a budget forgotten with them would let
        # another `cap` go out within the same window.
        if not flushed_at and done >= 2 * cap:
            test_redis.flush()  # a restart of a Redis that keeps nothing on disk
            flushed_at.append(done)
            # Comments that arrive meanwhile are tried at once, not only when the relay runs.
            for row in late:
                await enqueue_delivery(world.resources.queue, row.id)

    try:
        for row in rows:
            await enqueue_delivery(world.resources.queue, row.id)
        # A granted row whose job the flush lost is granted again once the budget is rebuilt.
        states = await _until_all_final(
            world, rows + late, stall_s=GRANT_TTL_S + 120, progress=flush_mid_backlog
        )
    finally:
        for worker in workers:
            worker.stop()
    assert flushed_at, "Redis was never flushed"
    assert flushed_at[0] < len(rows), "the backlog was over before Redis lost its data"
    assert all(state is LegState.SENT for state in states), states
    sent, most = _most_in_window(world, window_s)
    assert sent == len(rows) + len(late), "exactly one private reply per comment"
    assert most <= cap, f"{most} private replies within {window_s} s; the cap is {cap}"
    for row in rows + late:
        assert world.stats(row.trigger_id)["private_replies_delivered"] == 1


async def test_rebuilt_budget_counts_only_what_meta_may_have_counted(world: World) -> None:
    resources = _with_cap(world.resources, 10)
    sent = await world.comment("jane.doe")
    rejected = await world.comment("marco_rossi")
    assert (await deliver(resources, worker_id="w", dm_log_id=sent.id)).private == "SENT"
    world.admin.add_fault("messages", "reject", code=551, times=1)
    assert (await deliver(resources, worker_id="w", dm_log_id=rejected.id)).private == "FAILED"
    await resources.redis.flushdb()
    # Only the delivered reply holds a slot once the budget is rebuilt.
    assert await HourlyBudget(resources.redis, limit=10).used(world.account_id) == 0
    assert (await account_budget(resources).free(world.account_id)).free == 9


async def test_a_worker_killed_mid_run_holds_the_pacer_back_one_lease_at_most(
    world: World, delivery_env: dict[str, str], artifacts_dir: Path
) -> None:
    """A pacer run holds its account's turn on a lease it renews: a live run slower than the
    lease keeps its turn (no second run overlaps it), and a worker SIGKILLed mid-run leaves a
    turn that lapses within one lease; the run that found it taken meanwhile looked again at
    the lapse, which grants the backlog without anyone else kicking the pacer."""
    resources = world.resources
    redis = resources.redis
    fans = [await world.new_fan(f"turn.fan{n}") for n in range(4)]
    rows = [await world.comment(fan) for fan in fans]
    await world.execute("UPDATE instagram_accounts SET pr_backlog_since = now()")
    turn_key = _TURN_KEY.format(account_id=world.account_id)
    worker = start_worker(delivery_env, artifacts_dir, "turn-worker")
    try:

        async def beating() -> bool:
            assert worker.running, worker.output()[-3000:]
            return bool([k async for k in redis.scan_iter("oncereply:worker:heartbeat:*")])

        await _until(beating, what="the worker's heartbeat")
        async with resources.engine.connect() as blocker:
            # The worker's run of the pacer waits for the accounts table, holding its turn.
            await blocker.execute(text("LOCK TABLE instagram_accounts IN ACCESS EXCLUSIVE MODE"))
            await kick_pacer(resources.queue, [world.account_id])

            async def turn_taken() -> bool:
                assert worker.running, worker.output()[-3000:]
                return bool(await redis.exists(turn_key))

            await _until(turn_taken, what="the worker's pacer run to take the turn")
            holder = await redis.get(turn_key)
            # Longer than a lease: the live run has renewed it.
            await asyncio.sleep(TURN_LEASE_S + 2)
            assert await redis.get(turn_key) == holder, "a live run lost its turn"
            waited = await pace_account(resources, world.account_id)
            assert (waited.granted, waited.note) == (
                0,
                "another run of this account's pacer is under way",
            )
            worker.kill()  # SIGKILL mid-run: the turn is never given back
            await blocker.rollback()
    finally:
        worker.kill()
    assert await redis.get(turn_key) == holder
    assert 0 < await redis.pttl(turn_key) <= TURN_LEASE_S * 1000
    # Kicked meanwhile (the relay, a batch's end): the run finds the dead run's turn, and looks
    # again once it lapses.
    contended = await pace_account(resources, world.account_id)
    assert contended.granted == 0
    looks = [
        int(k.rpartition(":")[2])
        for k in await pending_keys(resources)
        if k.startswith(f"pace:{world.account_id}:") and k.rpartition(":")[2].isdigit()
    ]
    assert looks, "no look scheduled at the lapse of the dead run's turn"
    assert min(looks) <= time.time() + TURN_LEASE_S + 1

    async def all_sent() -> bool:
        return all([(await world.log(r.id)).pr_state is LegState.SENT for r in rows])

    await run_pacer_until(resources, all_sent)
    for row in rows:
        assert world.stats(row.trigger_id)["send_requests"] == 1


async def _until(check: Callable[[], Awaitable[bool]], *, what: str, within_s: float = 90) -> None:
    deadline = time.monotonic() + within_s
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up after {within_s:g} s waiting for {what}")
        await asyncio.sleep(0.1)


async def test_a_send_answered_while_its_budget_is_rebuilt_is_not_left_in_flight(
    world: World, test_redis: infra.TestRedis
) -> None:
    """Redis restarts empty while a private reply's request is on its way, and the budget is
    rebuilt from PostgreSQL before the answer is recorded: the rebuild counts the send in
    flight under its attempt's name. The job records the answer, then stamps its slot under
    that name too, so the send counts as answered at once, not as in flight for the rest of
    its allowance (`in_flight_s`, during which the account's pacer would grant no batch)."""
    settings = dataclasses.replace(world.resources.settings, send_timeout_s=30.0)
    resources = dataclasses.replace(world.resources, settings=settings)
    budget = account_budget(resources)
    row = await world.comment()
    # Meta takes its time answering: long enough to lose Redis and rebuild meanwhile.
    world.admin.add_fault("messages", "latency", seconds=10.0, times=1)
    delivering = asyncio.create_task(deliver(resources, worker_id="w", dm_log_id=row.id))
    await until_request_left(world, row.id, delivering)

    test_redis.flush()  # a restart of a Redis that keeps nothing on disk
    # Another process looks at the budget: rebuilt, with the send in flight.
    assert await budget.in_flight(world.account_id) == 1
    # The rebuild read the attempt before the answer was recorded.
    assert (await world.log(row.id)).pr_state is LegState.IN_FLIGHT

    report = await delivering
    assert report.private == LegState.SENT.value
    assert await budget.in_flight(world.account_id) == 0
    assert await budget.used(world.account_id) == 1
    assert world.stats(row.trigger_id)["send_requests"] == 1
