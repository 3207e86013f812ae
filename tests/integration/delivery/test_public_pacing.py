"""Public replies never take a DM's place: the private reply goes first in a job, public
replies have an hourly budget of their own, whose waiting replies hold no job each (the
account's pacer hands its slots out, oldest first), and a campaign may skip its public reply
while the account's DMs wait for the hourly limit. Against the sandbox."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import time
from datetime import timedelta
from pathlib import Path

from sqlalchemy import text

from app.db.engine import autocommit
from app.db.models import LegState
from app.delivery.recovery import sweeps
from app.delivery.send.budget import GRANT_TTL_S, Slot, grant_member, grant_stamp
from app.delivery.send.budget_history import account_budget, public_reply_budget
from app.delivery.send.comment_flow import BACKLOG_SKIP_REASON
from app.delivery.send.dispatch import deliver
from app.delivery.send.pacer import pace_account
from app.delivery.send.public_pacer import PUBLIC_WAIT_REASON, queue_public
from app.delivery.send.scheduling import enqueue_delivery
from app.delivery.send.throttle import SLOWED, Throttle
from app.instagram.graph import Usage
from app.resources import Resources
from tests.integration.delivery.conftest import World
from tests.integration.delivery.pacing import until_request_left
from tests.support import infra
from tests.support.processes import start_worker
from tests.support.webhooks import pending_keys


def _with_caps(resources: Resources, *, private: int, public: int) -> Resources:
    settings = dataclasses.replace(
        resources.settings, private_replies_per_hour=private, public_replies_per_hour=public
    )
    return dataclasses.replace(resources, settings=settings)


def _replies(world: World, comment_id: str) -> list[str]:
    return [r["text"] for r in world.admin.replies(comment_id=comment_id)]


async def _campaign(world: World, **fields: object) -> int:
    return await world.campaign(
        name="Thanks", public_reply_enabled=True, public_replies=["Thank you!"], **fields
    )


async def test_a_public_reply_uses_its_own_budget_and_goes_after_the_dm(world: World) -> None:
    resources = _with_caps(world.resources, private=5, public=5)
    campaign = await _campaign(world, public_reply_after_dm=False)
    row = await world.comment(campaign_id=campaign, public=True)
    report = await deliver(resources, worker_id="w", dm_log_id=row.id)
    assert (report.private, report.public) == ("SENT", "SENT")
    assert await account_budget(resources).used(world.account_id) == 1
    assert await public_reply_budget(resources).used(world.account_id) == 1
    (dm,) = world.inbox("jane.doe")
    (reply,) = world.admin.replies(comment_id=row.trigger_id)
    # The DM first: the public reply's call never stands before it.
    assert dm["time"] <= reply["time"], (dm, reply)


async def test_a_full_public_budget_leaves_the_public_reply_to_the_pacer_holding_no_job(
    world: World,
) -> None:
    resources = _with_caps(world.resources, private=5, public=1)
    campaign = await _campaign(world, public_reply_after_dm=False)
    public = public_reply_budget(resources)
    held = await public.reserve(world.account_id)
    assert isinstance(held, Slot)
    row = await world.comment(campaign_id=campaign, public=True)
    report = await deliver(resources, worker_id="w", dm_log_id=row.id)
    assert report.private == "SENT"
    assert report.public == "waiting for the public-reply budget"
    log = await world.log(row.id)
    assert (log.pr_state, log.pub_state) == (LegState.SENT, LegState.PENDING)
    assert log.pub_queued_at is not None
    assert log.pub_next_attempt_at is None
    # The creator reads why it waits in the log's details.
    assert log.pub_error_message == PUBLIC_WAIT_REASON
    assert _replies(world, row.trigger_id) == []
    assert len(world.inbox("jane.doe")) == 1
    # No job of its own: the account's pacer is what comes back for it.
    keys = await pending_keys(resources)
    assert not [k for k in keys if k.startswith(f"deliver:{row.id}")], keys
    assert [k for k in keys if k.startswith(f"pace:{world.account_id}")], keys
    assert await account_budget(resources).used(world.account_id) == 1
    # Neither the due-work relay nor a stray job sends it meanwhile.
    async with autocommit(resources.engine) as conn:
        await sweeps.relay_due_work(conn, resources.queue, grace_s=0)
    keys = await pending_keys(resources)
    assert not [k for k in keys if k.startswith(f"deliver:{row.id}")], keys
    stray = await deliver(resources, worker_id="w", dm_log_id=row.id)
    assert stray.public == "waiting for the public-reply budget"
    assert _replies(world, row.trigger_id) == []

    # A slot frees: the pacer grants it to the reply, and only the job carrying it posts.
    await public.release(held)
    paced = await pace_account(resources, world.account_id)
    assert paced.public_granted == 1
    log = await world.log(row.id)
    assert log.pub_granted_at is not None
    grant = grant_stamp(log.pub_granted_at)
    assert f"deliver:{row.id}:p{grant}" in await pending_keys(resources)
    # Granted but not claimed yet: the account keeps its mark, so the relay still leaves it.
    assert await _public_backlog_since(world) is not None
    other = await deliver(resources, worker_id="w", dm_log_id=row.id)
    assert other.public == "granted to the pacer's job"
    report = await deliver(resources, worker_id="w", dm_log_id=row.id, public_grant=grant)
    assert report.public == "SENT"
    assert _replies(world, row.trigger_id) == ["Thank you!"]
    log = await world.log(row.id)
    assert (log.pub_queued_at, log.pub_granted_at, log.pub_error_message) == (None, None, None)
    assert await public.used(world.account_id) == 1
    # Nothing waits any more: the pacer clears the account's mark and stops.
    assert (await pace_account(resources, world.account_id)).next_run_in_s is None
    assert await _public_backlog_since(world) is None


async def test_a_public_job_whose_grant_was_replaced_gives_its_slot_back(world: World) -> None:
    """A job carrying an older grant of a public reply (it waited past it, and the pacer
    granted the leg again) posts nothing, and gives the slot of its grant back at once."""
    resources = _with_caps(world.resources, private=5, public=2)
    campaign = await _campaign(world, public_reply_after_dm=False)
    public = public_reply_budget(resources)
    row = await world.comment(campaign_id=campaign, public=True)
    old = 1_000_000
    held = await public.grant(world.account_id, [grant_member(row.id, old)], batch=1)
    assert held.taken == 1
    assert await public.used(world.account_id) == 1
    await world.execute(
        "UPDATE dm_logs SET pub_granted_at = now(), pub_queued_at = now() WHERE id = :id",
        id=row.id,
    )
    report = await deliver(resources, worker_id="w", dm_log_id=row.id, public_grant=old)
    assert report.public == "granted to the pacer's job"
    assert _replies(world, row.trigger_id) == []
    assert await public.used(world.account_id) == 0


async def _public_backlog_since(world: World) -> object:
    async with autocommit(world.resources.engine) as conn:
        marked = await conn.execute(
            text("SELECT pub_backlog_since FROM instagram_accounts WHERE id = :id"),
            {"id": world.account_id},
        )
        return marked.scalar()


async def test_several_workers_post_public_replies_within_their_cap_once_each_after_the_dm(
    world: World, delivery_env: dict[str, str], artifacts_dir: Path
) -> None:
    cap, window_s, comments = 2, 2.0, 12
    env = {
        **delivery_env,
        "PRIVATE_REPLIES_PER_HOUR": "100",
        "PUBLIC_REPLIES_PER_HOUR": str(cap),
        "PRIVATE_REPLY_WINDOW_S": str(window_s),
    }
    campaign = await _campaign(world)  # the public reply waits for the DM (the default)
    fans = [await world.new_fan(f"thanks.fan{n}") for n in range(comments)]
    rows = [await world.comment(fan, campaign_id=campaign, public=True) for fan in fans]
    workers = [start_worker(env, artifacts_dir, f"public-pacer-worker-{n}") for n in range(3)]
    most_jobs, most_waiting = 0, 0
    try:
        for row in rows:
            await enqueue_delivery(world.resources.queue, row.id)
        last, last_change = (-1, -1), time.monotonic()
        while True:
            logs = [await world.log(r.id) for r in rows]
            done = sum(log.pr_state.is_final for log in logs)
            posted = sum(log.pub_state is not None and log.pub_state.is_final for log in logs)
            if done == posted == comments:
                break
            if done == comments:
                # Every DM is out: whatever delivery job is queued or running is a granted
                # public reply's, and a grant holds a slot, so no more than the cap (a DM's
                # granted job may still be running the pacer for the next batch at its end).
                jobs = [
                    k
                    for k in await pending_keys(world.resources)
                    if k.startswith("deliver:") and ":g" not in k
                ]
                waiting = await _waiting_public(world)
                most_jobs, most_waiting = max(most_jobs, len(jobs)), max(most_waiting, waiting)
            if (done, posted) != last:
                last, last_change = (done, posted), time.monotonic()
            elif time.monotonic() - last_change > 120:
                raise AssertionError(f"no progress for 120 s: {done} DMs, {posted} replies final")
            await asyncio.sleep(0.1)
    finally:
        for worker in workers:
            worker.stop()
    assert all((log.pr_state, log.pub_state) == (LegState.SENT,) * 2 for log in logs), logs
    assert most_waiting > cap, "the public replies did wait for their budget"
    assert most_jobs <= cap, f"{most_jobs} delivery jobs held while public replies waited"
    replies = world.admin.replies()
    assert sorted(r["comment_id"] for r in replies) == sorted(r.trigger_id for r in rows)
    dm_at = {m["comment_id"]: m["time"] for m in world.admin.messages() if m["comment_id"]}
    assert all(dm_at[r["comment_id"]] <= r["time"] for r in replies), "a reply before its DM"
    times = sorted(r["time"] for r in replies)
    most = max(sum(1 for t in times if start <= t < start + window_s) for start in times)
    assert most <= cap, f"{most} public replies within {window_s} s; their cap is {cap}"


async def _waiting_public(world: World) -> int:
    async with autocommit(world.resources.engine) as conn:
        waiting = await conn.execute(
            text(
                "SELECT count(*) FROM dm_logs WHERE pub_state = 'PENDING' "
                "AND pub_queued_at IS NOT NULL AND pub_granted_at IS NULL"
            )
        )
        return int(waiting.scalar() or 0)


async def test_the_campaign_may_skip_its_public_reply_while_dms_wait(world: World) -> None:
    resources = _with_caps(world.resources, private=5, public=5)
    skipping = await _campaign(
        world, public_reply_after_dm=False, public_reply_skip_in_backlog=True
    )
    posting = await _campaign(world, public_reply_after_dm=False, keywords=["guide"])
    await world.execute("UPDATE instagram_accounts SET pr_backlog_since = now()")
    skipped = await world.comment("jane.doe", campaign_id=skipping, public=True)
    posted = await world.comment("marco_rossi", "GUIDE please", campaign_id=posting, public=True)

    report = await deliver(resources, worker_id="w", dm_log_id=skipped.id)
    assert (report.private, report.public) == ("waiting for budget", "SKIPPED_RATE_LIMIT")
    log = await world.log(skipped.id)
    assert (log.pr_state, log.pub_state) == (LegState.PENDING, LegState.SKIPPED_RATE_LIMIT)
    assert log.pub_error_message == BACKLOG_SKIP_REASON
    assert _replies(world, skipped.trigger_id) == []

    # Without the switch the reply is posted while the DM waits for the pacer.
    report = await deliver(resources, worker_id="w", dm_log_id=posted.id)
    assert (report.private, report.public) == ("waiting for budget", "SENT")
    assert _replies(world, posted.trigger_id) == ["Thank you!"]
    assert await account_budget(resources).used(world.account_id) == 0


async def test_slowed_the_pacer_grants_public_replies_at_most_once_a_step(world: World) -> None:
    """While Meta has slowed the account, the pacer is woken far more often than once a step
    (each batch of DMs ends with a run, the relay kicks it, a run schedules the next): the
    public replies are still granted at most once a step of the slowed pace, whoever wakes
    it, and apart from the private replies' step (a DM granted in the same run does not hold
    the public reply back)."""
    window_s = 50.0
    # A batch of 2 at a cap of 100, so a step of 1 s; a code 4 with no stated wait slows the
    # account for 30 s, to the least share: one grant a step.
    settings = dataclasses.replace(
        world.resources.settings,
        private_replies_per_hour=100,
        public_replies_per_hour=100,
        private_reply_window_s=window_s,
    )
    resources = dataclasses.replace(world.resources, settings=settings)
    step_s = window_s * 2 / 100
    campaign = await _campaign(world, public_reply_after_dm=False)
    fans = [await world.new_fan(f"slow.fan{n}") for n in range(8)]
    rows = [await world.comment(fan, campaign_id=campaign, public=True) for fan in fans]
    async with autocommit(resources.engine) as conn:
        for row in rows:
            await queue_public(conn, row.id)
    await world.execute("UPDATE instagram_accounts SET pr_backlog_since = now()")
    throttle = Throttle(resources.redis, window_s=window_s)
    assert (await throttle.observe(world.account_id, Usage(), code=4)) is not None
    assert (await throttle.current(world.account_id)).mode == SLOWED

    first = await pace_account(resources, world.account_id)
    assert (first.pace, first.granted, first.public_granted) == (SLOWED, 1, 1)
    # Woken again and again for three steps: a grant a step, never two within one.
    started = time.monotonic()
    reports = []
    while time.monotonic() - started < 3 * step_s or len(reports) < 8:
        paced = await pace_account(resources, world.account_id)
        assert paced.pace == SLOWED, "the slow-down lasts the whole test"
        reports.append(paced.public_granted)
        await asyncio.sleep(0.02)
    assert 0 in reports, f"the pacer was never woken within a step: {reports}"
    logs = [await world.log(row.id) for row in rows]
    granted_at = sorted(log.pub_granted_at for log in logs if log.pub_granted_at is not None)
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(granted_at)]
    assert len(granted_at) >= 2, "the pacer went on granting once a step"
    # A grant's time is PostgreSQL's and its step is Redis's: the same clock to the millisecond.
    assert min(gaps) >= step_s - 0.002, f"two public grants within a step of {step_s} s: {gaps}"


async def test_after_losing_redis_public_replies_resume_at_once_within_their_cap(
    world: World, test_redis: infra.TestRedis
) -> None:
    """Redis restarts empty while granted public replies wait in the queue: their jobs are
    lost with it. The public budget rebuilt from PostgreSQL counts those grants' slots as used
    (the cap holds whatever became of their jobs) and gives the grants up, so the pacer's next
    run grants them again, oldest first, not two minutes later; a job of a grant given up posts
    nothing and gives its slot back, and every comment gets one public reply, within the cap."""
    cap = 10
    resources = _with_caps(world.resources, private=100, public=cap)
    campaign = await _campaign(world, public_reply_after_dm=False)
    public = public_reply_budget(resources)
    # Every public leg waits for the pacer from the start.
    await world.execute(
        "UPDATE instagram_accounts SET pub_backlog_since = now() WHERE id = :id",
        id=world.account_id,
    )

    async def waiting(fans: range, age_h: int) -> list[int]:
        rows = []
        for n in fans:
            # Made newest first, so id order and deadline order disagree.
            fan = await world.new_fan(f"restart.fan{n}")
            row = await world.comment(
                fan, campaign_id=campaign, public=True,
                age=timedelta(hours=age_h - n),
            )  # fmt: skip
            report = await deliver(resources, worker_id="w", dm_log_id=row.id)
            assert (report.private, report.public) == (
                "SENT", "waiting for the public-reply budget",
            )  # fmt: skip
            rows.append(row.id)
        return rows

    async def granted(rows: list[int]) -> dict[int, int]:
        stamps = {}
        for row_id in rows:
            at = (await world.log(row_id)).pub_granted_at
            if at is not None:
                stamps[row_id] = grant_stamp(at)
        return stamps

    first = await waiting(range(4), age_h=10)
    assert (await pace_account(resources, world.account_id)).public_granted == 4
    lost = await granted(first)
    assert set(lost) == set(first)
    # The oldest comment's reply is posted; the other three jobs are queued when Redis restarts.
    posted, *queued = first
    report = await deliver(resources, worker_id="w", dm_log_id=posted, public_grant=lost[posted])
    assert report.public == "SENT"

    test_redis.flush()  # a restart of a Redis that keeps nothing on disk

    # New public replies wait meanwhile (their legs join the account's queue).
    later = await waiting(range(4, 6), age_h=4)
    paced = await pace_account(resources, world.account_id)
    # One run grants the three given up, and the two new ones: the slots are free.
    assert paced.public_granted == len(queued) + len(later), "public replies stood still"
    regranted = await granted(first + later)
    assert set(regranted) == set(queued + later)
    assert all(regranted[i] != lost[i] for i in queued)
    # The rebuilt budget counts the posted reply, the three grants given up and the five new.
    assert await public.used(world.account_id) == 1 + len(queued) + len(regranted) <= cap
    # A job of a grant given up (taken by a worker just before the restart) posts nothing and
    # gives its slot back.
    survivor = queued[0]
    report = await deliver(
        resources, worker_id="w", dm_log_id=survivor, public_grant=lost[survivor]
    )
    assert report.public == "granted to the pacer's job"
    assert _replies(world, (await world.log(survivor)).trigger_id) == []
    assert await public.used(world.account_id) == len(queued) + len(regranted)

    for row_id, stamp in regranted.items():
        report = await deliver(resources, worker_id="w", dm_log_id=row_id, public_grant=stamp)
        assert report.public == "SENT"
    for row_id in first + later:
        log = await world.log(row_id)
        assert log.pub_state is LegState.SENT
        assert _replies(world, log.trigger_id) == ["Thank you!"]
    assert await public.used(world.account_id) <= cap


async def test_a_public_reply_answered_while_its_budget_is_rebuilt_is_not_left_in_flight(
    world: World, test_redis: infra.TestRedis
) -> None:
    """As a private reply's: Redis restarts empty while the public reply's request is on its
    way and the public budget is rebuilt before the answer is recorded; the job records the
    answer, then stamps its slot under the attempt's name the rebuild gave it."""
    settings = dataclasses.replace(
        world.resources.settings,
        send_timeout_s=30.0,
        private_replies_per_hour=5,
        public_replies_per_hour=5,
    )
    resources = dataclasses.replace(world.resources, settings=settings)
    public = public_reply_budget(resources)
    campaign = await _campaign(world, public_reply_after_dm=False)
    row = await world.comment(campaign_id=campaign, public=True)
    world.admin.add_fault("replies", "latency", seconds=10.0, times=1)
    delivering = asyncio.create_task(deliver(resources, worker_id="w", dm_log_id=row.id))
    await until_request_left(world, row.id, delivering, public=True)

    test_redis.flush()  # a restart of a Redis that keeps nothing on disk
    assert await public.in_flight(world.account_id) == 1
    assert (await world.log(row.id)).pub_state is LegState.IN_FLIGHT

    report = await delivering
    assert (report.private, report.public) == ("SENT", "SENT")
    assert await public.in_flight(world.account_id) == 0
    assert await public.used(world.account_id) == 1
    assert _replies(world, row.trigger_id) == ["Thank you!"]


async def test_several_workers_losing_redis_mid_backlog_resume_public_replies_within_their_cap(
    world: World, delivery_env: dict[str, str], artifacts_dir: Path, test_redis: infra.TestRedis
) -> None:
    """Three workers post a backlog of public replies at their cap; Redis restarts empty
    mid-backlog, while replies are granted, losing the queue with the budget. The replies go
    on, never more than the cap in any window, each posted once; a reply whose granted job the
    restart lost (whether one was still queued is the race's) goes on once the relay restarts
    the pacer, whose rebuilt budget gives its grant up, not two minutes later
    (`test_after_losing_redis_public_replies_resume_at_once_within_their_cap` takes that
    path every time)."""
    cap, window_s, comments = 2, 2.0, 10
    env = {
        **delivery_env,
        "PRIVATE_REPLIES_PER_HOUR": "100",
        "PUBLIC_REPLIES_PER_HOUR": str(cap),
        "PRIVATE_REPLY_WINDOW_S": str(window_s),
    }
    campaign = await _campaign(world)
    fans = [await world.new_fan(f"restart.fan{n}") for n in range(comments)]
    rows = [await world.comment(fan, campaign_id=campaign, public=True) for fan in fans]
    workers = [start_worker(env, artifacts_dir, f"public-restart-worker-{n}") for n in range(3)]
    flushed_at: int | None = None
    # The relay restarts the pacer within its 30 s round; a lost grant held its reply 120 s.
    stall_s = GRANT_TTL_S - 30.0
    try:
        for row in rows:
            await enqueue_delivery(world.resources.queue, row.id)
        last, last_change = (-1, -1), time.monotonic()
        while True:
            logs = [await world.log(r.id) for r in rows]
            done = sum(log.pr_state.is_final for log in logs)
            posted = sum(log.pub_state is not None and log.pub_state.is_final for log in logs)
            if done == posted == comments:
                break
            # Every DM out, some replies posted and more waiting: mid-backlog. Whether a grant
            # is out at that moment is the race's: a grant lives for a few milliseconds between
            # the pacer's run and its job's claim, too short for this loop to wait for.
            if flushed_at is None and done == comments and cap <= posted < comments - cap:
                test_redis.flush()  # a restart of a Redis that keeps nothing on disk
                flushed_at = posted
            if (done, posted) != last:
                last, last_change = (done, posted), time.monotonic()
            elif time.monotonic() - last_change > stall_s:
                raise AssertionError(
                    f"no progress for {stall_s} s: {done} DMs, {posted} replies final"
                )
            await asyncio.sleep(0.05)
    finally:
        for worker in workers:
            worker.stop()
    assert flushed_at is not None, "Redis was never flushed"
    assert flushed_at < comments, "the backlog was over before Redis lost its data"
    assert all((log.pr_state, log.pub_state) == (LegState.SENT,) * 2 for log in logs), logs
    replies = world.admin.replies()
    assert sorted(r["comment_id"] for r in replies) == sorted(r.trigger_id for r in rows)
    times = sorted(r["time"] for r in replies)
    most = max(sum(1 for t in times if start <= t < start + window_s) for start in times)
    assert most <= cap, f"{most} public replies within {window_s} s; their cap is {cap}"
