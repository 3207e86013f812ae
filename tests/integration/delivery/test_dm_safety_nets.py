"""The safety nets cover taps, DM triggers and follow-ups too: the due-work relay enqueues each
row's own job, the stale-claim sweep makes a DM left IN_FLIGHT UNCONFIRMED (with an inbox
check), a creator's retry works on a DM, and any delivery job runs any row."""

from __future__ import annotations

from app.db.engine import autocommit
from app.db.models import LegState, PersonClaim, TriggerKind
from app.delivery.recovery import sweeps
from app.delivery.recovery.manual_retry import RetryStatus
from app.delivery.send import claims
from app.delivery.send.dispatch import deliver
from app.delivery.send.quota import usage_month
from app.delivery.send.scheduling import delivery_key
from app.queue import JobName
from tests.integration.delivery.conftest import World
from tests.integration.delivery.conversations import (
    ACCOUNT,
    Hooks,
    logs,
    one,
    reveals,
    run_due,
    two_step_campaign,
)


async def _dm_row(world: World, hooks: Hooks, fan: str = "jane.doe") -> int:
    await two_step_campaign(world, dm_trigger_enabled=True)
    world.admin.fan_dm(fan, ACCOUNT, "recipe")
    await hooks.deliver("messages")
    return (await one(world, TriggerKind.MESSAGE)).id


async def test_the_relay_enqueues_a_lost_dm_job_under_its_own_name(world: World) -> None:
    hooks = Hooks(world)
    row_id = await _dm_row(world, hooks)
    queue = world.resources.queue
    job = await queue.job(f"deliver:{row_id}")
    assert job is not None
    assert job.function == JobName.PROCESS_MESSAGE
    await job.abort("lost with Redis")
    await world.resources.redis.flushdb()
    async with autocommit(world.resources.engine) as conn:
        relayed = await sweeps.relay_due_work(conn, queue, grace_s=0)
    assert relayed.enqueued == 1
    job = await queue.job(f"deliver:{row_id}")
    assert job is not None
    assert job.function == JobName.PROCESS_MESSAGE


async def test_a_dm_left_in_flight_after_its_request_is_unconfirmed_with_an_inbox_check(
    world: World,
) -> None:
    hooks = Hooks(world)
    row_id = await _dm_row(world, hooks, "marco_rossi")
    async with autocommit(world.resources.engine) as conn:
        claim = await claims.claim_private_reply(
            conn,
            dm_log_id=row_id,
            worker_id="dead-worker",
            request_kind="template",
            message_text="Here it is, there!",
            month=usage_month(),
            person=PersonClaim.REVEAL,
        )
        assert claim is not None
        assert claim.won
        assert await claims.mark_request_sent(
            conn, dm_log_id=row_id, worker_id="dead-worker", attempt_no=claim.attempt_no
        )
        await world.execute(
            "UPDATE dm_logs SET pr_claimed_at = now() - interval '5 minutes' WHERE id = :id",
            id=row_id,
        )
        swept = await sweeps.sweep_stale_claims(conn, world.resources.queue, older_than_s=60)
    assert swept.private == [row_id]
    assert (await world.log(row_id)).pr_state is LegState.UNCONFIRMED
    check = await world.resources.queue.job(f"verify:{row_id}")
    assert check is not None
    # The person's reveal claim stays with the unsure row: another keyword DM is not answered.
    world.admin.fan_dm("marco_rossi", ACCOUNT, "recipe??")
    await hooks.deliver("messages")
    await run_due(world)
    assert reveals(world, "marco_rossi") == []


async def test_a_creator_can_retry_a_failed_dm(world: World) -> None:
    hooks = Hooks(world)
    row_id = await _dm_row(world, hooks, "olga.petrova")
    world.admin.add_fault("messages", "reject", code=551, times=1)
    [report] = await run_due(world)
    assert report.private == "FAILED"

    result = await world.retry(row_id, confirm=False)
    assert result.status is RetryStatus.QUEUED
    assert result.kind is TriggerKind.MESSAGE
    assert result.enqueued
    job = await world.resources.queue.job(delivery_key(row_id, result.due))
    assert job is not None
    assert job.function == JobName.PROCESS_MESSAGE
    await run_due(world)
    assert (await world.log(row_id)).pr_state is LegState.SENT
    assert len(reveals(world, "olga.petrova")) == 1


async def test_a_dm_whose_window_closed_cannot_be_retried(world: World) -> None:
    hooks = Hooks(world)
    row_id = await _dm_row(world, hooks, "sam.okafor")
    world.admin.add_fault("messages", "reject", code=551, times=1)
    await run_due(world)
    await world.execute(
        "UPDATE dm_logs SET deadline_at = now() - interval '1 second' WHERE id = :id", id=row_id
    )
    result = await world.retry(row_id, confirm=False)
    assert result.status is RetryStatus.NOT_RETRYABLE
    assert "24-hour" in result.message


async def test_any_delivery_job_runs_any_row(world: World) -> None:
    """The dashboard's retry enqueues `process_comment` whatever the row: the row's kind picks
    its flow."""
    hooks = Hooks(world)
    row_id = await _dm_row(world, hooks, "zoe.lefevre")
    report = await deliver(
        world.resources, worker_id="w", dm_log_id=row_id, kind=TriggerKind.COMMENT
    )
    assert report.private == "SENT"
    comment = await world.comment("zoe.lefevre")
    report = await deliver(
        world.resources, worker_id="w", dm_log_id=comment.id, kind=TriggerKind.FOLLOW_UP
    )
    assert report.private == "SENT"


async def test_dms_count_against_the_quota_but_not_the_hourly_private_reply_budget(
    world: World,
) -> None:
    from app.delivery.send.budget import BudgetFull, HourlyBudget
    from app.delivery.send.quota import usage

    hooks = Hooks(world)
    await two_step_campaign(world, dm_trigger_enabled=True)
    await world.execute(
        "UPDATE workspaces SET monthly_dm_quota = 2 WHERE id = :id", id=world.workspace_id
    )
    # The account's hourly private-reply budget is full: comments wait, DMs do not.
    budget = HourlyBudget(
        world.resources.redis, limit=world.resources.settings.private_replies_per_hour
    )
    while not isinstance(await budget.reserve(world.account_id), BudgetFull):
        pass
    comment = await world.comment("jane.doe")
    world.admin.fan_dm("marco_rossi", ACCOUNT, "recipe")
    await hooks.deliver("messages")
    await run_due(world)
    assert (await world.log(comment.id)).pr_state is LegState.PENDING
    assert (await one(world, TriggerKind.MESSAGE)).pr_state is LegState.SENT
    async with autocommit(world.resources.engine) as conn:
        assert (await usage(conn, world.workspace_id)).reserved == 1

    # The monthly quota counts every DM: with it used up, the next DM trigger is skipped.
    await world.execute(
        "UPDATE workspaces SET monthly_dm_quota = 1 WHERE id = :id", id=world.workspace_id
    )
    world.admin.fan_dm("olga.petrova", ACCOUNT, "recipe")
    await hooks.deliver("messages")
    await run_due(world)
    states = sorted(row.pr_state.value for row in await logs(world, TriggerKind.MESSAGE))
    assert states == ["SENT", "SKIPPED_QUOTA"]
    assert reveals(world, "olga.petrova") == []
