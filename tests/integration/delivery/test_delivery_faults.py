"""Every way a send can end, against the sandbox's injected faults.

Ambiguous answers (the sandbox delivers, then errs, hangs or resets) must end UNCONFIRMED
with exactly one message in the inbox and no further request, whatever runs afterwards.
Definite rejections land in the state their classification gives them, with its retry rule
(docs/architecture.md#classification).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import select

from app.clicks.tokens import LinkTarget
from app.db.engine import autocommit
from app.db.models import AccountStatus, AttemptClass, InstagramAccount, LegState, OperationalEvent
from app.delivery.recovery import sweeps
from app.delivery.recovery.inbox_check import verify_unconfirmed
from app.delivery.recovery.manual_retry import RetryStatus
from app.delivery.send.dispatch import deliver
from app.delivery.send.outcomes import PACED_RETRY
from tests.integration.delivery.conftest import SEND_TIMEOUT_S, World
from tests.integration.delivery.pacing import run_pacer
from tests.support.links import target_of
from tests.support.webhooks import pending_keys

AMBIGUOUS = {
    "code 1 after delivery": {"action": "deliver_then_error", "code": 1},
    "HTTP 500 after delivery": {"action": "deliver_then_error", "http_status": 500},
    "hang past the client timeout": {"action": "deliver_then_hang", "seconds": SEND_TIMEOUT_S + 2},
    "connection reset after delivery": {"action": "deliver_then_reset"},
}


@pytest.mark.parametrize("fault", list(AMBIGUOUS.values()), ids=list(AMBIGUOUS))
async def test_ambiguous_outcomes_are_unconfirmed_and_never_resent(
    world: World, fault: dict[str, Any]
) -> None:
    row = await world.comment("jane.doe")
    world.admin.add_fault("messages", times=1, **fault)
    report = await deliver(world.resources, worker_id="w", dm_log_id=row.id)
    assert report.private == "UNCONFIRMED", report
    log = await world.log(row.id)
    assert log.pr_state is LegState.UNCONFIRMED
    assert log.pr_message_id is None
    [attempt] = await world.attempts(row.id)
    assert attempt.classification is AttemptClass.AMBIGUOUS

    # Nothing that runs later sends again: the same job, the relay, the stale sweep.
    await deliver(world.resources, worker_id="w2", dm_log_id=row.id)
    async with autocommit(world.resources.engine) as conn:
        await sweeps.relay_due_work(conn, world.resources.queue, grace_s=0)
        await sweeps.sweep_stale_claims(conn, None, older_than_s=0)
    await deliver(world.resources, worker_id="w3", dm_log_id=row.id)
    stats = world.stats(row.trigger_id)
    assert stats["send_requests"] == 1
    assert stats["private_replies_delivered"] == 1
    assert len(world.inbox("jane.doe")) == 1
    assert (await world.log(row.id)).pr_state is LegState.UNCONFIRMED

    # The inbox check finds the message and settles it as SENT, with the evidence.
    result = await verify_unconfirmed(world.resources, row.id)
    assert result.status == "confirmed", result
    log = await world.log(row.id)
    assert log.pr_state is LegState.SENT
    assert log.pr_message_id
    assert log.pr_evidence is not None
    assert log.pr_evidence["confirmed_by"] == "conversations_api"


# Rate limits of the account's pace: the row waits for the account's pacer.
PACE_LIMITS = [
    (4, None),
    (17, None),
    (32, None),
    (613, None),
    (613, 2534040),
    (80002, None),
]
# Retryable refusals that say nothing about the Instagram account's pace (Messenger's
# business-use-case limit): retried on the attempt budget's schedule.
RETRYABLE = [(80006, None)]
FINAL = [
    (10, 2534022, LegState.SKIPPED_WINDOW_EXPIRED),
    (10, None, LegState.FAILED),
    (100, 2534025, LegState.FAILED),
    (100, 33, LegState.FAILED),
    (100, None, LegState.FAILED),
    (551, None, LegState.FAILED),
    (200, None, LegState.FAILED),
    (200, 2534041, LegState.FAILED),
]


@pytest.mark.parametrize(("code", "subcode"), PACE_LIMITS)
async def test_a_rate_limit_leaves_the_reply_to_the_accounts_pacer(
    world: World, code: int, subcode: int | None
) -> None:
    row = await world.comment()
    world.admin.add_fault("messages", "reject", code=code, subcode=subcode, times=1)
    report = await deliver(world.resources, worker_id="w", dm_log_id=row.id)
    assert report.private == "PENDING"
    log = await world.log(row.id)
    # The account's pace, not this message: the attempt is given back, no fixed retry time.
    assert (log.pr_attempts, log.pr_next_attempt_at, log.pr_granted_at) == (0, None, None)
    assert log.pr_error_code == code
    assert log.pr_error_message is not None
    assert log.pr_error_message.endswith(PACED_RETRY)
    [attempt] = await world.attempts(row.id)
    assert attempt.classification is AttemptClass.RETRYABLE
    assert attempt.meta_code == code
    assert world.inbox("jane.doe") == []
    async with world.resources.sessionmaker() as session:
        account = await session.get(InstagramAccount, world.account_id)
        assert account is not None
        assert account.pr_backlog_since is not None
    keys = await pending_keys(world.resources)
    assert not [k for k in keys if k.startswith("deliver:")], "the row holds no job of its own"
    # A job that meets the row now (the relay, a duplicate) leaves it to the pacer.
    early = await deliver(world.resources, worker_id="early", dm_log_id=row.id)
    assert early.private == "waiting for budget"
    # The worker runs the pacer the send woke; it grants the row, whose job sends it.
    run = await run_pacer(world.resources)
    assert [report.granted for report in run.paced] == [1]
    assert [(dm_log_id, report.private) for dm_log_id, report in run.delivered] == [
        (row.id, "SENT")
    ]
    log = await world.log(row.id)
    assert (log.pr_state, log.pr_attempts) == (LegState.SENT, 1)
    assert len(world.inbox("jane.doe")) == 1
    assert world.stats(row.trigger_id)["send_requests"] == 2


@pytest.mark.parametrize(("code", "subcode"), RETRYABLE)
async def test_rate_limits_retry_later_within_the_budget(
    world: World, code: int, subcode: int | None
) -> None:
    row = await world.comment()
    world.admin.add_fault("messages", "reject", code=code, subcode=subcode, times=1)
    started = datetime.now(UTC)
    report = await deliver(world.resources, worker_id="w", dm_log_id=row.id)
    assert report.private == "PENDING"
    log = await world.log(row.id)
    assert log.pr_attempts == 1
    assert log.pr_error_code == code
    assert log.pr_next_attempt_at is not None
    delay = log.pr_next_attempt_at - started
    assert timedelta(minutes=4, seconds=55) <= delay <= timedelta(minutes=5, seconds=10)
    [attempt] = await world.attempts(row.id)
    assert attempt.classification is AttemptClass.RETRYABLE
    assert attempt.meta_code == code
    assert world.inbox("jane.doe") == []
    await world.execute("UPDATE dm_logs SET pr_next_attempt_at = now() WHERE id = :id", id=row.id)
    assert (await deliver(world.resources, worker_id="w", dm_log_id=row.id)).private == ("SENT")
    assert len(world.inbox("jane.doe")) == 1


async def test_a_retryable_rejection_is_retried_after_5_then_15_minutes_then_fails(
    world: World,
) -> None:
    row = await world.comment()
    world.admin.add_fault("messages", "reject", code=80006)
    waits = []
    for attempt in (1, 2):
        started = datetime.now(UTC)
        report = await deliver(world.resources, worker_id="w", dm_log_id=row.id)
        assert report.private == "PENDING"
        log = await world.log(row.id)
        assert log.pr_attempts == attempt
        assert log.pr_next_attempt_at is not None
        waits.append(log.pr_next_attempt_at - started)
        await world.execute(
            "UPDATE dm_logs SET pr_next_attempt_at = now() WHERE id = :id", id=row.id
        )
    for wait, minutes in zip(waits, (5, 15), strict=True):
        assert timedelta(minutes=minutes) <= wait <= timedelta(minutes=minutes, seconds=10)
    # The third attempt is the budget's last: no retry is scheduled after it.
    report = await deliver(world.resources, worker_id="w", dm_log_id=row.id)
    assert report.private == "FAILED"
    log = await world.log(row.id)
    assert (log.pr_attempts, log.pr_next_attempt_at) == (3, None)
    assert log.pr_error_message is not None
    assert log.pr_error_message.startswith("gave up after 3 attempts")
    assert world.stats(row.trigger_id)["send_requests"] == 3
    assert world.inbox("jane.doe") == []


@pytest.mark.parametrize(("code", "subcode", "state"), FINAL)
async def test_final_rejections_settle_without_retry(
    world: World, code: int, subcode: int | None, state: LegState
) -> None:
    row = await world.comment()
    world.admin.add_fault("messages", "reject", code=code, subcode=subcode)
    report = await deliver(world.resources, worker_id="w", dm_log_id=row.id)
    assert report.private == state.value
    log = await world.log(row.id)
    assert log.pr_state is state
    assert log.pr_error_code == code
    assert log.pr_error_message
    assert log.pr_next_attempt_at is None
    [attempt] = await world.attempts(row.id)
    assert attempt.classification is AttemptClass.REJECTED
    await deliver(world.resources, worker_id="w", dm_log_id=row.id)
    assert world.stats(row.trigger_id)["send_requests"] == 1


async def test_code_2_is_ambiguous(world: World) -> None:
    row = await world.comment()
    world.admin.add_fault("messages", "reject", code=2)
    assert (await deliver(world.resources, worker_id="w", dm_log_id=row.id)).private == (
        "UNCONFIRMED"
    )


async def test_368_pauses_the_account_and_the_work_waits(world: World) -> None:
    row = await world.comment()
    world.admin.add_fault("messages", "reject", code=368, times=1)
    report = await deliver(world.resources, worker_id="w", dm_log_id=row.id)
    assert report.private == "PENDING"
    log = await world.log(row.id)
    assert log.pr_attempts == 0, "a policy pause does not use up the message's attempts"
    async with world.resources.sessionmaker() as session:
        account = await session.get(InstagramAccount, world.account_id)
        assert account is not None
        assert account.status is AccountStatus.PAUSED
        assert account.paused_until is not None
        assert account.status_reason
        assert log.pr_next_attempt_at == account.paused_until
        kinds = (await session.scalars(select(OperationalEvent.kind))).all()
    assert kinds == ["account_paused"]
    other = await world.comment("marco_rossi")
    waiting = await deliver(world.resources, worker_id="w", dm_log_id=other.id)
    assert waiting.private is None
    assert "waiting" in waiting.notes[0]
    assert world.stats(other.trigger_id)["send_requests"] == 0
    # When the pause is over the relay resumes the account and the work goes out.
    await world.execute("UPDATE instagram_accounts SET paused_until = now() - interval '1 second'")
    await world.execute("UPDATE dm_logs SET pr_next_attempt_at = now() - interval '2 minutes'")
    async with autocommit(world.resources.engine) as conn:
        relayed = await sweeps.relay_due_work(conn, world.resources.queue, grace_s=0)
    assert relayed.resumed_accounts == 1
    assert relayed.enqueued == 2
    for dm_log in (row, other):
        assert (
            await deliver(world.resources, worker_id="w", dm_log_id=dm_log.id)
        ).private == "SENT"


async def test_368_on_the_public_reply_pauses_the_account_after_the_dm_went_first(
    world: World,
) -> None:
    campaign = await world.campaign(
        name="Public whatever happens",
        public_reply_after_dm=False,
        public_reply_enabled=True,
        public_replies=["Check your DMs"],
    )
    row = await world.comment(campaign_id=campaign, public=True)
    world.admin.add_fault("replies", "reject", code=368, times=1)
    report = await deliver(world.resources, worker_id="w", dm_log_id=row.id)
    # The DM goes first in a job: a public reply never stands before it.
    assert (report.private, report.public) == ("SENT", "PENDING")
    assert len(world.inbox("jane.doe")) == 1
    async with world.resources.sessionmaker() as session:
        account = await session.get(InstagramAccount, world.account_id)
        assert account is not None
        assert account.status is AccountStatus.PAUSED
        paused_until = account.paused_until
    log = await world.log(row.id)
    assert log.pub_next_attempt_at == paused_until
    assert [a.leg for a in await world.attempts(row.id)] == ["private_reply", "public_reply"]
    # When the pause is over, the public reply goes out; the DM is not sent again.
    await world.execute("UPDATE instagram_accounts SET paused_until = now() - interval '1 second'")
    await world.execute("UPDATE dm_logs SET pub_next_attempt_at = now()")
    report = await deliver(world.resources, worker_id="w", dm_log_id=row.id)
    assert report.public == "SENT"
    assert len(world.inbox("jane.doe")) == 1
    assert world.stats(row.trigger_id)["send_requests"] == 1


async def test_190_refreshes_the_token_once_and_retries(world: World) -> None:
    row = await world.comment()
    before = (await world.log(row.id)).pr_attempts
    world.admin.add_fault("messages", "reject", code=190, subcode=463, times=1)
    report = await deliver(world.resources, worker_id="w", dm_log_id=row.id)
    assert report.private == "PENDING"
    log = await world.log(row.id)
    assert log.pr_attempts == before
    async with world.resources.sessionmaker() as session:
        account = await session.get(InstagramAccount, world.account_id)
        assert account is not None
        assert account.status is AccountStatus.ACTIVE
        assert account.token_issued_at is not None
        assert datetime.now(UTC) - account.token_issued_at < timedelta(minutes=1)
    await world.execute("UPDATE dm_logs SET pr_next_attempt_at = now() WHERE id = :id", id=row.id)
    assert (await deliver(world.resources, worker_id="w", dm_log_id=row.id)).private == ("SENT")


async def test_190_that_cannot_be_refreshed_marks_needs_reauth_and_waits(world: World) -> None:
    row = await world.comment()
    world.admin.revoke_tokens(account="sunny.bakes")
    report = await deliver(world.resources, worker_id="w", dm_log_id=row.id)
    assert report.private == "PENDING"
    async with world.resources.sessionmaker() as session:
        account = await session.get(InstagramAccount, world.account_id)
        assert account is not None
        assert account.status is AccountStatus.NEEDS_REAUTH
        kinds = (await session.scalars(select(OperationalEvent.kind))).all()
    assert kinds == ["account_needs_reauth"]
    log = await world.log(row.id)
    assert log.pr_state is LegState.PENDING
    assert log.pr_attempts == 0
    # The relay leaves the work of an account that needs reconnecting alone.
    await world.execute("UPDATE dm_logs SET pr_next_attempt_at = now() - interval '2 minutes'")
    async with autocommit(world.resources.engine) as conn:
        assert (await sweeps.relay_due_work(conn, world.resources.queue, grace_s=0)).enqueued == 0


async def test_template_rejected_falls_back_to_text(world: World) -> None:
    campaign = await world.campaign(
        name="Buttons",
        dm_text="Hey {username}, tap below",
        buttons=[{"title": "Get the recipe", "url": "https://sunny.example/lemon"}],
    )
    row = await world.comment(campaign_id=campaign)
    world.admin.add_fault(
        "messages", "reject", code=100, message="(#100) Invalid button template payload", times=1
    )
    report = await deliver(world.resources, worker_id="w", dm_log_id=row.id)
    assert report.private == "SENT"
    attempts = await world.attempts(row.id)
    assert [(a.request_kind, a.classification) for a in attempts] == [
        ("template", AttemptClass.REJECTED),
        ("text", AttemptClass.SENT),
    ]
    [message] = world.inbox("jane.doe")
    text, _, link = message["text"].partition("\n")
    assert text == "Hey jane.doe, tap below"
    assert target_of(link) == LinkTarget(row.id, 0, "https://sunny.example/lemon")


@pytest.mark.parametrize(
    ("code", "subcode", "message"),
    [
        (10, 2534022, "This message is sent outside of allowed window."),
        (100, 2534025, "The comment is invalid for a private reply (template)"),
        (100, 2534014, "The requested user cannot be found (button template)"),
    ],
)
async def test_no_text_fallback_after_window_or_used_comment(
    world: World, code: int, subcode: int, message: str
) -> None:
    campaign = await world.campaign(
        name="Buttons", buttons=[{"title": "Open", "url": "https://sunny.example/x"}]
    )
    row = await world.comment(campaign_id=campaign)
    world.admin.add_fault("messages", "reject", code=code, subcode=subcode, message=message)
    await deliver(world.resources, worker_id="w", dm_log_id=row.id)
    assert len(await world.attempts(row.id)) == 1
    assert world.stats(row.trigger_id)["send_requests"] == 1


async def test_manual_retry_of_an_unconfirmed_send_confirmed_by_2534025(world: World) -> None:
    row = await world.comment()
    world.admin.add_fault("messages", "deliver_then_error", code=1, times=1)
    await deliver(world.resources, worker_id="w", dm_log_id=row.id)
    refused = await world.retry(row.id, confirm=False)
    assert refused.status is RetryStatus.NEEDS_CONFIRMATION
    other = await world.retry(row.id, confirm=True, workspace_id=world.workspace_id + 1)
    assert other.status is RetryStatus.NOT_FOUND
    queued = await world.retry(row.id, confirm=True)
    assert queued.status is RetryStatus.QUEUED
    assert queued.enqueued
    report = await deliver(world.resources, worker_id="w", dm_log_id=row.id)
    assert report.private == "SENT"
    log = await world.log(row.id)
    assert log.pr_evidence is not None
    assert log.pr_evidence["confirmed_by"] == "meta_already_used"
    assert log.pr_evidence["manual_retry"]["from_state"] == "UNCONFIRMED"
    assert log.pr_attempts == 2
    assert log.pr_attempt_limit == 4
    assert len(world.inbox("jane.doe")) == 1
    again = await world.retry(row.id, confirm=True)
    assert again.status is RetryStatus.NOT_RETRYABLE
    assert again.state is LegState.SENT


async def test_manual_retry_of_a_failed_send_gets_a_fresh_budget(world: World) -> None:
    row = await world.comment()
    fault = world.admin.add_fault("messages", "reject", code=80006)
    for _ in range(3):
        await deliver(world.resources, worker_id="w", dm_log_id=row.id)
        await world.execute(
            "UPDATE dm_logs SET pr_next_attempt_at = now() WHERE id = :id", id=row.id
        )
    assert (await world.log(row.id)).pr_state is LegState.FAILED
    world.admin.remove_fault(fault["id"])
    result = await world.retry(row.id, confirm=False)
    assert result.status is RetryStatus.QUEUED
    assert (await deliver(world.resources, worker_id="w", dm_log_id=row.id)).private == ("SENT")
    log = await world.log(row.id)
    assert log.pr_attempts == 4
    assert log.pr_attempt_limit == 6
    assert [a.attempt_no for a in await world.attempts(row.id)] == [1, 2, 3, 4]
