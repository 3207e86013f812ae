"""The send path against the sandbox: one DM per comment, whatever arrives how often."""

from __future__ import annotations

import asyncio

from sqlalchemy import text

from app.db.engine import autocommit
from app.db.models import AttemptClass, LegState
from app.delivery.send.dispatch import deliver
from tests.integration.delivery.conftest import World


async def test_a_comment_gets_exactly_one_private_reply(world: World) -> None:
    row = await world.comment("jane.doe")
    report = await deliver(world.resources, worker_id="w1", dm_log_id=row.id)
    assert report.private == "SENT", report
    log = await world.log(row.id)
    assert log.pr_state is LegState.SENT
    assert log.pr_message_id
    assert log.pr_sent_at
    assert log.pr_attempts == 1
    inbox = world.inbox("jane.doe")
    assert [m["text"] for m in inbox] == ["Hi jane.doe! Here it is:"]
    attempts = await world.attempts(row.id)
    assert [(a.attempt_no, a.classification) for a in attempts] == [(1, AttemptClass.SENT)]
    assert attempts[0].finished_at is not None
    assert attempts[0].http_status == 200

    again = await asyncio.gather(
        *(deliver(world.resources, worker_id=f"w{i}", dm_log_id=row.id) for i in range(5))
    )
    assert all(r.private is None for r in again)
    assert world.stats(row.trigger_id)["send_requests"] == 1
    assert len(world.inbox("jane.doe")) == 1


async def test_stale_claims_whose_request_left_become_unconfirmed_with_an_inbox_check(
    world: World,
) -> None:
    from app.delivery.recovery import sweeps
    from app.delivery.recovery.inbox_check import verify_unconfirmed
    from app.delivery.send import claims
    from app.delivery.send.quota import usage_month

    row = await world.comment("lucia.mendez")
    async with autocommit(world.resources.engine) as conn:
        claim = await claims.claim_private_reply(
            conn,
            dm_log_id=row.id,
            worker_id="dead-worker",
            request_kind="text",
            message_text="Hi lucia.mendez! Here it is:",
            month=usage_month(),
        )
        assert claim is not None
        assert claim.won
        # The worker noted its request as leaving, then died: Meta may have it.
        assert await claims.mark_request_sent(
            conn, dm_log_id=row.id, worker_id="dead-worker", attempt_no=claim.attempt_no
        )
        fresh = await sweeps.sweep_stale_claims(conn, None, older_than_s=60)
        assert fresh.private == []
        await conn.execute(text("UPDATE dm_logs SET pr_claimed_at = now() - interval '2 minutes'"))
        swept = await sweeps.sweep_stale_claims(conn, world.resources.queue, older_than_s=60)
    assert swept.private == [row.id]
    log = await world.log(row.id)
    assert log.pr_state is LegState.UNCONFIRMED
    assert log.pr_error_message
    assert "as the request was leaving" in log.pr_error_message
    [attempt] = await world.attempts(row.id)
    assert attempt.classification is AttemptClass.AMBIGUOUS
    assert attempt.finished_at
    # Nothing was actually sent: the inbox check says so and the leg stays UNCONFIRMED.
    result = await verify_unconfirmed(world.resources, row.id)
    assert result.status == "not_found"
    log = await world.log(row.id)
    assert log.pr_state is LegState.UNCONFIRMED
    assert log.pr_evidence is not None
    assert log.pr_evidence["inbox_check"]["result"] == "not_found"
    assert "checked_at" in log.pr_evidence["inbox_check"]
    assert (await deliver(world.resources, worker_id="w", dm_log_id=row.id)).private is None
    assert world.stats(row.trigger_id)["send_requests"] == 0


async def test_a_claim_whose_message_leaves_next_writes_the_request_note_itself(
    world: World,
) -> None:
    """One statement claims and notes: the note only on the claim that won, and a claim that
    dies before its send is then, rightly, a maybe-sent for the sweep."""
    from app.delivery.recovery import sweeps
    from app.delivery.send import claims
    from app.delivery.send.quota import usage_month

    fan, other = await world.new_fan("amara.okafor"), await world.new_fan("ines.duarte")
    first = await world.comment(fan)
    again = await world.comment(fan, "RECIPE again please")
    plain = await world.comment(other)

    async def claim(row_id: int, *, note: bool) -> object:
        async with autocommit(world.resources.engine) as conn:
            return await claims.claim_private_reply(
                conn,
                dm_log_id=row_id,
                worker_id="w-note",
                request_kind="text",
                message_text="Hi! Here it is:",
                month=usage_month(),
                note_request=note,
            )

    won = await claim(first.id, note=True)
    assert isinstance(won, claims.Claim)
    assert won.won
    assert (await world.log(first.id)).pr_requested_at is not None
    skipped = await claim(again.id, note=True)
    assert isinstance(skipped, claims.Claim)
    assert skipped.state is LegState.SKIPPED_DEDUP
    assert (await world.log(again.id)).pr_requested_at is None
    unnoted = await claim(plain.id, note=False)
    assert isinstance(unnoted, claims.Claim)
    assert unnoted.won
    assert (await world.log(plain.id)).pr_requested_at is None

    async with autocommit(world.resources.engine) as conn:
        await conn.execute(
            text(
                "UPDATE dm_logs SET pr_claimed_at = now() - interval '2 minutes' "
                "WHERE pr_state = 'IN_FLIGHT'"
            )
        )
        swept = await sweeps.sweep_stale_claims(conn, world.resources.queue, older_than_s=60)
    assert (swept.private, swept.resent) == ([first.id], [plain.id])
    assert (await world.log(first.id)).pr_state is LegState.UNCONFIRMED
    assert (await world.log(plain.id)).pr_state is LegState.PENDING
    assert world.stats(first.trigger_id)["send_requests"] == 0


async def test_repeated_enqueues_and_the_relay_send_once(world: World) -> None:
    from app.delivery.recovery import sweeps
    from app.delivery.send.scheduling import enqueue_delivery

    row = await world.comment("yamada.hanako")
    queue = world.resources.queue
    assert await enqueue_delivery(queue, row.id)
    assert await enqueue_delivery(queue, row.id)  # coalesced with the waiting job
    assert await queue.count("queued") == 1
    async with autocommit(world.resources.engine) as conn:
        relayed = await sweeps.relay_due_work(conn, queue, grace_s=0)
    assert relayed.enqueued == 1
    assert await queue.count("queued") == 1, "the relay's key matches the waiting job"
    for _ in range(3):
        await deliver(world.resources, worker_id="w", dm_log_id=row.id)
    assert len(world.inbox("yamada.hanako")) == 1
