"""The send path against the sandbox: one DM per comment, whatever arrives how often."""

from __future__ import annotations

import asyncio

from app.db.models import AttemptClass, LegState
from app.delivery.process_comment import process_comment
from tests.integration.delivery.conftest import World


async def test_a_comment_gets_exactly_one_private_reply(world: World) -> None:
    row = await world.comment("jane.doe")
    report = await process_comment(world.resources, worker_id="w1", dm_log_id=row.id)
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
        *(process_comment(world.resources, worker_id=f"w{i}", dm_log_id=row.id) for i in range(5))
    )
    assert all(r.private is None for r in again)
    assert world.stats(row.trigger_id)["send_requests"] == 1
    assert len(world.inbox("jane.doe")) == 1
