"""The dashboard never says SENT without evidence that this row's message arrived, and what it
says about an unsure send is true for its cause.

Three ways the promise once broke, each against the real sandbox, PostgreSQL and Redis:

1. the inbox check credited a row with another row's message (same fan, same text, a second
   send refused with nothing delivered, or never sent by a worker that died first);
2. a retry answered 100/2534025 ("already has its private reply") was taken as proof that an
   earlier send arrived although no earlier request of ours can have arrived;
3. a claim whose worker died before its request left was called "Instagram accepted the
   request but its answer was lost" (UNCONFIRMED) instead of being sent again.

A worker that dies between its claim and its request is played by running the claim
statement as that worker and nothing after it: exactly the rows it leaves behind.
"""

from __future__ import annotations

import asyncio
import math
import time

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from app.db.engine import autocommit
from app.db.models import AttemptClass, DmLog, Leg, LegState
from app.delivery.recovery import sweeps
from app.delivery.recovery.inbox_check import verify_unconfirmed
from app.delivery.send import claims
from app.delivery.send.dispatch import deliver
from app.delivery.send.legs import Claim
from app.delivery.send.quota import usage, usage_month
from app.delivery_log.queries import fetch_timeline, state_sentence
from app.heartbeat import Heartbeat, write_heartbeat
from app.jobs import handlers
from app.jobs.context import JobRuntime
from app.queue.saq_adapter import pending_job_keys
from tests.integration.delivery.conftest import World

STALE_S = 60


async def _every_comment_campaign(world: World) -> int:
    """A campaign with "Send each person this DM only once" off: each comment gets its DM."""
    return await world.campaign(name="Every comment", once_per_person=False)


async def _claim_and_die(world: World, row: DmLog, *, request_left: bool = False) -> None:
    """A worker claims the row's private reply and dies, before its request left (or just
    after, with `request_left`); its claim is then older than the longest send."""
    async with autocommit(world.resources.engine) as conn:
        claim = await claims.claim_private_reply(
            conn,
            dm_log_id=row.id,
            worker_id="dead-worker",
            request_kind="text",
            message_text=f"Hi {row.recipient_username}! Here it is:",
            month=usage_month(),
        )
        assert claim is not None
        assert claim.won
        if request_left:
            assert await claims.mark_request_sent(
                conn, dm_log_id=row.id, worker_id="dead-worker", attempt_no=claim.attempt_no
            )
        await conn.execute(
            text("UPDATE dm_logs SET pr_claimed_at = now() - interval '2 minutes' WHERE id = :id"),
            {"id": row.id},
        )


async def _sweep(world: World) -> sweeps.SweepResult:
    async with autocommit(world.resources.engine) as conn:
        return await sweeps.sweep_stale_claims(conn, world.resources.queue, older_than_s=STALE_S)


async def _recover(world: World, row_id: int) -> DmLog:
    """Whatever the safety nets do next with the row: the inbox check for an UNCONFIRMED one,
    a delivery run for a PENDING one."""
    log = await world.log(row_id)
    if log.pr_state is LegState.UNCONFIRMED:
        await verify_unconfirmed(world.resources, row_id)
    elif log.pr_state is LegState.PENDING:
        await deliver(world.resources, worker_id="w-after", dm_log_id=row_id)
    return await world.log(row_id)


# --- 1. the inbox check cannot credit another row's message ---------------------------------


async def test_a_refused_second_send_is_not_credited_with_the_first_rows_message(
    world: World,
) -> None:
    campaign = await _every_comment_campaign(world)
    first = await world.comment("jane.doe", campaign_id=campaign)
    assert (await deliver(world.resources, worker_id="w", dm_log_id=first.id)).private == "SENT"
    first_message = (await world.log(first.id)).pr_message_id
    assert first_message

    second = await world.comment("jane.doe", campaign_id=campaign)
    world.admin.add_fault("messages", "reject", code=2, http_status=503, times=1)
    report = await deliver(world.resources, worker_id="w", dm_log_id=second.id)
    assert report.private == "UNCONFIRMED", report
    assert world.stats(second.trigger_id)["private_replies_delivered"] == 0
    assert len(world.inbox("jane.doe")) == 1

    result = await verify_unconfirmed(world.resources, second.id)
    assert result.status == "not_found", result
    log = await world.log(second.id)
    assert log.pr_state is LegState.UNCONFIRMED
    assert log.pr_message_id is None
    assert log.pr_evidence is not None
    detail = log.pr_evidence["inbox_check"]["detail"]
    assert "set aside" in detail, detail
    assert (await world.log(first.id)).pr_message_id == first_message


async def test_a_claim_whose_worker_died_before_sending_is_not_credited_with_another_message(
    world: World,
) -> None:
    campaign = await _every_comment_campaign(world)
    first = await world.comment("jane.doe", campaign_id=campaign)
    assert (await deliver(world.resources, worker_id="w", dm_log_id=first.id)).private == "SENT"
    second = await world.comment("jane.doe", campaign_id=campaign)
    await _claim_and_die(world, second)
    await _sweep(world)

    log = await _recover(world, second.id)
    delivered = world.stats(second.trigger_id)["private_replies_delivered"]
    if log.pr_state is LegState.SENT:
        assert delivered == 1, "SENT, but the sandbox delivered nothing for this comment"
        assert log.pr_message_id != (await world.log(first.id)).pr_message_id
    assert log.pr_state is LegState.SENT, log.pr_state
    assert len(world.inbox("jane.doe")) == 2


async def test_one_message_confirms_at_most_one_row(world: World) -> None:
    """Two unsure sends to the same fan with the same text, one of which was delivered: the
    two inbox checks, racing, credit that one message to one row only."""
    campaign = await _every_comment_campaign(world)
    rows = [await world.comment("jane.doe", campaign_id=campaign) for _ in range(2)]
    world.admin.add_fault("messages", "deliver_then_error", code=1, times=1)
    world.admin.add_fault("messages", "reject", code=2, http_status=503, times=1)
    reports = await asyncio.gather(
        *(deliver(world.resources, worker_id=f"w{i}", dm_log_id=r.id) for i, r in enumerate(rows))
    )
    assert [r.private for r in reports] == ["UNCONFIRMED", "UNCONFIRMED"], reports
    [message] = world.inbox("jane.doe")

    await asyncio.gather(*(verify_unconfirmed(world.resources, r.id) for r in rows))
    logs = [await world.log(r.id) for r in rows]
    sent = [log for log in logs if log.pr_state is LegState.SENT]
    assert len(sent) == 1, [log.pr_state for log in logs]
    assert sent[0].pr_message_id == message["mid"]

    # The key, not a lookup: no statement can give a second row the same message id.
    other = next(log for log in logs if log.pr_state is not LegState.SENT)
    with pytest.raises(IntegrityError):
        await world.execute(
            "UPDATE dm_logs SET pr_message_id = :mid WHERE id = :id",
            mid=message["mid"],
            id=other.id,
        )


# --- 2. "already has its private reply" proves nothing without an ambiguous attempt --------


async def test_2534025_after_a_claim_that_never_sent_is_failed_with_metas_reason(
    world: World,
) -> None:
    row = await world.comment("jane.doe")
    await _claim_and_die(world, row)
    await _sweep(world)
    if (await world.log(row.id)).pr_state is LegState.UNCONFIRMED:
        # What a creator would do with it: confirm the retry.
        await world.retry(row.id, confirm=True)
    # Meta answers the same code for a comment that is too old or ineligible.
    world.admin.add_fault("messages", "reject", code=100, subcode=2534025, times=1)
    await deliver(world.resources, worker_id="w", dm_log_id=row.id)

    log = await world.log(row.id)
    assert world.stats(row.trigger_id)["private_replies_delivered"] == 0
    assert log.pr_state is LegState.FAILED, log.pr_state
    assert (log.pr_error_code, log.pr_error_subcode) == (100, 2534025)
    assert log.pr_error_message
    assert "already used" in log.pr_error_message
    assert "confirmed_by" not in (log.pr_evidence or {})


async def test_2534025_after_an_ambiguous_attempt_is_proof_even_after_a_failed_retry(
    world: World,
) -> None:
    """An ambiguous first send, then a creator's retry that is rate limited to FAILED, then a
    second retry answered 2534025: the first send is what used the comment's reply."""
    row = await world.comment("jane.doe")
    world.admin.add_fault("messages", "deliver_then_error", code=1, times=1)
    assert (await deliver(world.resources, worker_id="w", dm_log_id=row.id)).private == (
        "UNCONFIRMED"
    )
    await world.retry(row.id, confirm=True)
    limited = world.admin.add_fault("messages", "reject", code=80006)
    for _ in range(3):
        await deliver(world.resources, worker_id="w", dm_log_id=row.id)
        await world.execute(
            "UPDATE dm_logs SET pr_next_attempt_at = now() WHERE id = :id", id=row.id
        )
    assert (await world.log(row.id)).pr_state is LegState.FAILED
    world.admin.remove_fault(limited["id"])
    await world.retry(row.id, confirm=False)
    assert (await deliver(world.resources, worker_id="w", dm_log_id=row.id)).private == "SENT"
    log = await world.log(row.id)
    assert log.pr_evidence is not None
    assert log.pr_evidence["confirmed_by"] == "meta_already_used"
    assert len(world.inbox("jane.doe")) == 1


# --- 3. a claim abandoned before its request is retried, and said to be -------------------


async def test_a_claim_abandoned_before_its_request_is_sent_again_and_said_to_be(
    world: World,
) -> None:
    await world.execute("UPDATE workspaces SET monthly_dm_quota = 1000")  # counted: capped
    row = await world.comment("jane.doe")
    quota_before = await _reserved(world)
    await _claim_and_die(world, row)
    swept = await _sweep(world)

    log = await world.log(row.id)
    assert log.pr_state is LegState.PENDING, log.pr_state
    assert log.pr_error_message
    assert "before the request left" in log.pr_error_message
    assert "nothing was sent" in log.pr_error_message
    async with world.resources.sessionmaker() as session:
        timeline = await fetch_timeline(session, world.workspace_id, row.id)
    assert timeline is not None
    assert "may already have sent" not in state_sentence(timeline)
    [attempt] = await world.attempts(row.id)
    assert attempt.classification is AttemptClass.RETRYABLE
    assert attempt.finished_at is not None
    # Nothing was sent, so the quota reservation went back; the job is already queued.
    assert await _reserved(world) == quota_before
    assert swept.resent == [row.id]
    assert await world.resources.queue.job(f"deliver:{row.id}:{_epoch(log)}") is not None

    assert (await deliver(world.resources, worker_id="w", dm_log_id=row.id)).private == "SENT"
    log = await world.log(row.id)
    assert log.pr_attempts == 2
    assert log.pr_attempt_limit == 4, "the abandoned claim does not use up the budget"
    assert len(world.inbox("jane.doe")) == 1
    assert await _reserved(world) == quota_before + 1


async def test_a_worker_that_died_after_its_request_left_is_unconfirmed_saying_so(
    world: World,
) -> None:
    row = await world.comment("jane.doe")
    await _claim_and_die(world, row, request_left=True)
    swept = await _sweep(world)
    assert swept.private == [row.id]
    log = await world.log(row.id)
    assert log.pr_state is LegState.UNCONFIRMED
    assert log.pr_error_message
    assert "as the request was leaving" in log.pr_error_message
    [attempt] = await world.attempts(row.id)
    assert attempt.classification is AttemptClass.AMBIGUOUS
    assert await world.resources.queue.job(f"verify:{row.id}") is not None
    # Nothing arrived, and the check says so without crediting anything.
    assert (await verify_unconfirmed(world.resources, row.id)).status == "not_found"
    assert (await deliver(world.resources, worker_id="w", dm_log_id=row.id)).private is None
    assert world.stats(row.trigger_id)["send_requests"] == 0


async def test_a_claim_without_its_note_is_given_back_sooner_than_one_with_it(
    world: World,
) -> None:
    """A note follows its claim within moments: without one after `unsent_after_s` the claim
    was abandoned (the DM goes out again in seconds), while a claim with one may still be
    waiting for Meta's answer and is left to its holder."""
    stale_s = sweeps.stale_after_s(10.0)
    unsent_s = sweeps.unsent_after_s(10.0)
    assert unsent_s < stale_s
    silent = await world.comment("jane.doe")
    noted = await world.comment("lucia.mendez")
    await _claim_and_die(world, silent)
    await _claim_and_die(world, noted, request_left=True)
    await world.execute(
        "UPDATE dm_logs SET pr_claimed_at = now() - make_interval(secs => :age)",
        age=(unsent_s + stale_s) / 2,
    )
    async with autocommit(world.resources.engine) as conn:
        swept = await sweeps.sweep_stale_claims(
            conn, None, older_than_s=stale_s, unsent_older_than_s=unsent_s
        )
    assert (swept.resent, swept.private) == ([silent.id], [])
    assert (await world.log(noted.id)).pr_state is LegState.IN_FLIGHT


async def test_a_slow_live_sender_keeps_its_claim_until_its_job_has_ended(world: World) -> None:
    """On a loaded machine a live send can outlast the sweep's thresholds: while its worker
    still beats and its job may still run, the claim stays its own (its note and record are
    accepted); once the job's timeout has passed, the sweep settles it as for a dead worker."""
    silent = await world.comment("jane.doe")
    noted = await world.comment("lucia.mendez")
    await _claim_and_die(world, silent)
    await _claim_and_die(world, noted, request_left=True)  # both claimed 2 minutes ago

    async def sweep(alive: list[str], held_s: float) -> sweeps.SweepResult:
        async with autocommit(world.resources.engine) as conn:
            return await sweeps.sweep_stale_claims(
                conn,
                world.resources.queue,
                older_than_s=STALE_S,
                unsent_older_than_s=10,
                alive=alive,
                held_s=held_s,
            )

    kept = await sweep(["dead-worker"], 180)
    assert (kept.resent, kept.private) == ([], [])
    for row in (silent, noted):
        assert (await world.log(row.id)).pr_state is LegState.IN_FLIGHT
    async with autocommit(world.resources.engine) as conn:
        assert await claims.mark_request_sent(
            conn, dm_log_id=silent.id, worker_id="dead-worker", attempt_no=1
        )
    # Once its job's timeout has passed, the holder's beat keeps nothing (it may beat on
    # after its job was cut short): both may have been delivered.
    over = await sweep(["dead-worker"], 100)
    assert (over.resent, sorted(over.private)) == ([], sorted([silent.id, noted.id]))


async def test_the_sweep_cron_leaves_the_claims_of_beating_workers(world: World) -> None:
    """The cron reads which workers beat (app/heartbeat.py), as the worker writes it."""
    slow = await world.comment("jane.doe")
    dead = await world.comment("lucia.mendez")
    for row in (slow, dead):
        await _claim_and_die(world, row, request_left=True)
    resources = world.resources
    older = sweeps.stale_after_s(resources.settings.send_timeout_s)
    await world.execute(
        "UPDATE dm_logs SET pr_claimed_by = 'slow-worker', "
        "pr_claimed_at = now() - make_interval(secs => :age) WHERE id = :id",
        age=older + 5,
        id=slow.id,
    )
    await world.execute(
        "UPDATE dm_logs SET pr_claimed_at = now() - make_interval(secs => :age) WHERE id = :id",
        age=older + 5,
        id=dead.id,
    )
    now = time.time()
    await write_heartbeat(
        resources.redis, Heartbeat("slow-worker", 1, "host", "test", now, now, 0, None)
    )
    swept = await handlers.sweep_stale_claims({"state": JobRuntime("w", resources)})
    assert swept == {"private": 1, "public": 0, "resent": 0}
    assert (await world.log(slow.id)).pr_state is LegState.IN_FLIGHT
    assert (await world.log(dead.id)).pr_state is LegState.UNCONFIRMED


async def test_a_sender_whose_claim_was_swept_does_not_send(world: World) -> None:
    """The note before the request is the fence: once the sweep gave the leg back, the late
    holder of the old claim may not send, even under the same worker id."""
    row = await world.comment("jane.doe")
    await _claim_and_die(world, row)
    await _sweep(world)
    async with autocommit(world.resources.engine) as conn:
        late = await claims.mark_request_sent(
            conn, dm_log_id=row.id, worker_id="dead-worker", attempt_no=1
        )
        assert not late
        claim = await claims.claim_private_reply(
            conn,
            dm_log_id=row.id,
            worker_id="dead-worker",
            request_kind="text",
            message_text="Hi jane.doe! Here it is:",
            month=usage_month(),
        )
        assert claim is not None
        assert claim.attempt_no == 2
        assert not await claims.mark_request_sent(
            conn, dm_log_id=row.id, worker_id="dead-worker", attempt_no=1
        )
        assert await claims.mark_request_sent(
            conn, dm_log_id=row.id, worker_id="dead-worker", attempt_no=2
        )


async def _public_claim_and_die(world: World, row: DmLog, *, request_left: bool) -> None:
    async with autocommit(world.resources.engine) as conn:
        claim = await claims.claim_public_reply(
            conn, dm_log_id=row.id, worker_id="dead-worker", reply_text="Check your DMs"
        )
        assert isinstance(claim, Claim)
        if request_left:
            assert await claims.mark_request_sent(
                conn,
                dm_log_id=row.id,
                worker_id="dead-worker",
                attempt_no=claim.attempt_no,
                leg=Leg.PUBLIC_REPLY,
            )
        await conn.execute(
            text("UPDATE dm_logs SET pub_claimed_at = now() - interval '2 minutes' WHERE id = :id"),
            {"id": row.id},
        )


async def test_a_public_reply_abandoned_before_it_left_is_posted_again(world: World) -> None:
    campaign = await world.campaign(
        name="Public first", public_reply_enabled=True, public_replies=["Check your DMs"]
    )
    row = await world.comment("jane.doe", campaign_id=campaign, public=True)
    await _public_claim_and_die(world, row, request_left=False)
    swept = await _sweep(world)
    assert (swept.public, swept.resent) == ([], [row.id])
    log = await world.log(row.id)
    assert log.pub_state is LegState.PENDING
    assert log.pub_error_message
    assert "nothing was posted" in log.pub_error_message
    report = await deliver(world.resources, worker_id="w", dm_log_id=row.id)
    assert (report.public, report.private) == ("SENT", "SENT")
    assert len(world.admin.requests(endpoint="replies")) == 1


async def test_a_public_reply_whose_worker_died_after_it_left_is_unconfirmed(
    world: World,
) -> None:
    campaign = await world.campaign(
        name="Public first", public_reply_enabled=True, public_replies=["Check your DMs"]
    )
    row = await world.comment("jane.doe", campaign_id=campaign, public=True)
    await _public_claim_and_die(world, row, request_left=True)
    swept = await _sweep(world)
    assert (swept.public, swept.resent) == ([row.id], [])
    log = await world.log(row.id)
    assert log.pub_state is LegState.UNCONFIRMED
    assert log.pub_error_message
    assert "as the reply was leaving" in log.pub_error_message


async def _reserved(world: World) -> int:
    async with autocommit(world.resources.engine) as conn:
        return (await usage(conn, world.workspace_id)).reserved


def _epoch(log: DmLog) -> int:
    assert log.pr_next_attempt_at is not None
    return math.ceil(log.pr_next_attempt_at.timestamp())


async def test_an_inbox_check_lost_with_redis_is_queued_again_by_the_relay(world: World) -> None:
    row = await world.comment("jane.doe")
    world.admin.add_fault("messages", "deliver_then_error", code=1, times=1)
    assert (await deliver(world.resources, worker_id="w", dm_log_id=row.id)).private == (
        "UNCONFIRMED"
    )
    queue = world.resources.queue
    assert await queue.job(f"verify:{row.id}") is not None
    await world.resources.redis.flushdb()  # Redis restarted empty: the check's job is gone
    async with autocommit(world.resources.engine) as conn:
        early = await sweeps.relay_due_work(conn, queue)
        assert early.checks == 0, "a fresh UNCONFIRMED leg waits for its own check first"
        relayed = await sweeps.relay_due_work(conn, queue, grace_s=0)
    assert relayed.checks == 1
    assert await queue.job(f"verify:{row.id}") is not None
    assert (await verify_unconfirmed(world.resources, row.id)).status == "confirmed"
    async with autocommit(world.resources.engine) as conn:
        assert (await sweeps.relay_due_work(conn, queue, grace_s=0)).checks == 0


async def test_a_text_match_waits_only_for_a_send_of_the_same_text_in_flight(
    world: World,
) -> None:
    campaign = await _every_comment_campaign(world)
    unsure = await world.comment("jane.doe", campaign_id=campaign)
    world.admin.add_fault("messages", "deliver_then_error", code=1, times=1)
    assert (await deliver(world.resources, worker_id="w", dm_log_id=unsure.id)).private == (
        "UNCONFIRMED"
    )
    sent_text = (await world.log(unsure.id)).message_text
    other = await world.comment("jane.doe", campaign_id=campaign)
    async with autocommit(world.resources.engine) as conn:
        claim = await claims.claim_private_reply(
            conn,
            dm_log_id=other.id,
            worker_id="busy-worker",
            request_kind="text",
            message_text=sent_text or "",
            month=usage_month(),
        )
        assert claim is not None
        assert claim.won
    # Another send of the same text to the same person is in flight: it may own the message.
    assert (await verify_unconfirmed(world.resources, unsure.id)).status == "waiting"
    await world.execute(
        "UPDATE dm_logs SET message_text = 'another campaign''s DM' WHERE id = :id", id=other.id
    )
    # Of another text, it cannot.
    assert (await verify_unconfirmed(world.resources, unsure.id)).status == "confirmed"


async def test_a_check_that_must_look_again_queues_its_next_look_from_its_own_job(
    world: World,
) -> None:
    campaign = await _every_comment_campaign(world)
    unsure = await world.comment("jane.doe", campaign_id=campaign)
    world.admin.add_fault("messages", "deliver_then_error", code=1, times=1)
    assert (await deliver(world.resources, worker_id="w", dm_log_id=unsure.id)).private == (
        "UNCONFIRMED"
    )
    other = await world.comment("jane.doe", campaign_id=campaign)
    async with autocommit(world.resources.engine) as conn:
        claim = await claims.claim_private_reply(
            conn,
            dm_log_id=other.id,
            worker_id="busy-worker",
            request_kind="text",
            message_text=(await world.log(unsure.id)).message_text or "",
            month=usage_month(),
        )
        assert claim is not None
        assert claim.won
    queue = world.resources.queue
    # The check runs as its job `verify:<id>`, which SAQ holds until the check returns.
    assert f"verify:{unsure.id}" in await pending_job_keys(queue)
    assert (await verify_unconfirmed(world.resources, unsure.id)).status == "waiting"
    again = [k for k in await pending_job_keys(queue) if k.startswith(f"verify:{unsure.id}:")]
    assert len(again) == 1, "the next look was refused: it reused the running job's key"
