"""Claims race for real: concurrent statements on separate connections, exactly one wins."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from app.db.engine import autocommit
from app.db.models import LegState
from app.delivery.send import claims
from app.delivery.send.budget_history import public_reply_budget
from app.delivery.send.dispatch import deliver
from app.delivery.send.legs import AccountUnable, Claim
from app.delivery.send.quota import usage, usage_month
from tests.integration.delivery.conftest import World
from tests.integration.delivery.polling import account


async def _claim(world: World, dm_log_id: int, worker: str) -> Claim | AccountUnable | None:
    async with autocommit(world.resources.engine) as conn:
        return await claims.claim_private_reply(
            conn,
            dm_log_id=dm_log_id,
            worker_id=worker,
            request_kind="text",
            message_text="hi",
            month=usage_month(),
        )


async def test_sixteen_concurrent_claims_on_one_leg_one_wins(world: World) -> None:
    await world.execute("UPDATE workspaces SET monthly_dm_quota = 1000")  # counted: capped
    row = await world.comment()
    results = await asyncio.gather(*(_claim(world, row.id, f"w{i}") for i in range(16)))
    won = [r for r in results if r is not None and r.won]
    assert len(won) == 1
    assert all(r is None for r in results if r not in won)
    log = await world.log(row.id)
    assert log.pr_state is LegState.IN_FLIGHT
    assert log.pr_attempts == 1
    assert len(await world.attempts(row.id)) == 1
    async with autocommit(world.resources.engine) as conn:
        assert (await usage(conn, world.workspace_id)).reserved == 1


async def test_the_attempt_budget_holds_across_separate_jobs(world: World) -> None:
    await world.execute("UPDATE workspaces SET monthly_dm_quota = 1000")  # counted: capped
    row = await world.comment()
    world.admin.add_fault("messages", "reject", code=80006)
    for attempt in (1, 2, 3):
        report = await deliver(world.resources, worker_id=f"job{attempt}", dm_log_id=row.id)
        log = await world.log(row.id)
        assert log.pr_attempts == attempt
        if attempt < 3:
            assert report.private == "PENDING"
            assert log.pr_next_attempt_at is not None
            # A job arriving before the retry time (a duplicate, the relay) does nothing.
            early = await deliver(world.resources, worker_id="early", dm_log_id=row.id)
            assert early.private is None
            assert "nothing due" in early.notes
            await world.execute(
                "UPDATE dm_logs SET pr_next_attempt_at = now() - interval '1 s' WHERE id = :id",
                id=row.id,
            )
    assert (await world.log(row.id)).pr_state is LegState.FAILED
    late = await deliver(world.resources, worker_id="job4", dm_log_id=row.id)
    assert late.private is None
    assert world.stats(row.trigger_id)["send_requests"] == 3
    assert len(await world.attempts(row.id)) == 3
    async with autocommit(world.resources.engine) as conn:
        assert (await usage(conn, world.workspace_id)).reserved == 0  # given back each time


async def test_two_comments_of_one_person_at_once_get_one_dm(world: World) -> None:
    first = await world.comment("marco_rossi", "RECIPE")
    second = await world.comment("marco_rossi", "recipe pls")
    reports = await asyncio.gather(
        deliver(world.resources, worker_id="a", dm_log_id=first.id),
        deliver(world.resources, worker_id="b", dm_log_id=second.id),
    )
    assert sorted(str(r.private) for r in reports) == ["SENT", "SKIPPED_DEDUP"]
    assert len(world.inbox("marco_rossi")) == 1


async def test_a_definite_failure_frees_the_person_for_a_later_comment(world: World) -> None:
    first = await world.comment("olga.petrova")
    world.admin.add_fault("messages", "reject", code=551, times=1)
    assert (await deliver(world.resources, worker_id="a", dm_log_id=first.id)).private == ("FAILED")
    second = await world.comment("olga.petrova", "RECIPE again")
    assert (await deliver(world.resources, worker_id="a", dm_log_id=second.id)).private == ("SENT")


async def test_once_per_person_off_lets_every_comment_through(world: World) -> None:
    campaign = await world.campaign(name="Every time", once_per_person=False)
    rows = [await world.comment("zoe.lefevre", campaign_id=campaign) for _ in range(2)]
    for row in rows:
        report = await deliver(world.resources, worker_id="a", dm_log_id=row.id)
        assert report.private == "SENT"
    assert len(world.inbox("zoe.lefevre")) == 2


async def test_a_person_claim_left_by_a_dead_row_can_be_taken_over(world: World) -> None:
    first = await world.comment("priya.cooks")
    assert (await _claim(world, first.id, "w")) is not None
    # As if the worker died after the claim and the row was later settled without the
    # person claim being removed.
    await world.execute("UPDATE dm_logs SET pr_state = 'FAILED' WHERE id = :id", id=first.id)
    second = await world.comment("priya.cooks", "RECIPE 2", age=timedelta(seconds=1))
    claim = await _claim(world, second.id, "w")
    assert claim is not None
    assert claim.won


@pytest.mark.parametrize(
    ("status", "paused_for"),
    [("paused", timedelta(hours=6)), ("needs_reauth", None), ("paused", None)],
    ids=["automatic pause", "needs reauth", "paused by the creator"],
)
async def test_no_leg_is_claimed_while_the_account_cannot_send(
    world: World, status: str, paused_for: timedelta | None
) -> None:
    await world.execute("UPDATE workspaces SET monthly_dm_quota = 1000")  # counted: capped
    row = await world.comment(public=True)
    await world.execute(
        "UPDATE instagram_accounts SET status = :status, paused_until = now() + :wait",
        status=status,
        wait=paused_for,
    )
    refused = await _claim(world, row.id, "w")
    assert isinstance(refused, AccountUnable)
    assert refused.status == status
    assert (refused.paused_until is None) is (paused_for is None)
    async with autocommit(world.resources.engine) as conn:
        public = await claims.claim_public_reply(
            conn, dm_log_id=row.id, worker_id="w", reply_text="hi"
        )
        assert public == refused
        assert (await usage(conn, world.workspace_id)).reserved == 0
    log = await world.log(row.id)
    assert (log.pr_state, log.pub_state) == (LegState.PENDING, LegState.PENDING)
    assert (log.pr_attempts, log.pub_attempts) == (0, 0)
    assert await world.attempts(row.id) == []
    # An automatic pause that has run out is no obstacle, as at load.
    await world.execute(
        "UPDATE instagram_accounts SET status = 'paused', paused_until = now() - interval '1 s'"
    )
    claim = await _claim(world, row.id, "w")
    assert isinstance(claim, Claim)
    assert claim.won


async def test_a_pause_after_the_load_stops_the_claim_and_the_work_waits(world: World) -> None:
    campaign = await world.campaign(
        name="Public whatever happens",
        public_reply_after_dm=False,
        public_reply_enabled=True,
        public_replies=["Check your DMs"],
    )
    row = await world.comment(campaign_id=campaign, public=True)
    # While this job's DM is on its way, another job meets a 368 and pauses the account: this
    # job loaded an active account, its public-reply claim must see the pause.
    world.admin.add_fault("messages", "latency", seconds=1.0, times=1)
    job = asyncio.create_task(deliver(world.resources, worker_id="w", dm_log_id=row.id))
    await asyncio.sleep(0.5)
    await world.execute(
        "UPDATE instagram_accounts SET status = 'paused', paused_until = now() + interval '6 h'"
    )
    report = await job
    assert (report.private, report.public) == ("SENT", "waiting for the account")
    assert world.admin.replies(comment_id=row.trigger_id) == []
    budget = public_reply_budget(world.resources)
    assert await budget.used(world.account_id) == 0, "the public reply's slot was given back"
    log = await world.log(row.id)
    assert log.pub_state is LegState.PENDING
    assert log.pub_attempts == 0
    assert log.pub_next_attempt_at == (await account(world)).paused_until
