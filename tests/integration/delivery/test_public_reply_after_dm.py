"""The public reply says what happened: "Sent you a DM!" goes under the comment only once the
DM is SENT (the default); a campaign whose reply does not mention the DM may post it whatever
became of the DM. Against the sandbox, whose replies endpoint records every public reply."""

from __future__ import annotations

from app.db.models import LegState
from app.delivery.recovery.inbox_check import verify_unconfirmed
from app.delivery.send.dispatch import deliver
from app.delivery.send.recording import WAITING_FOR_DM
from tests.integration.delivery.conftest import World
from tests.support.webhooks import queued_keys


async def _campaign(world: World, **fields: object) -> int:
    return await world.campaign(
        name="Says it DMed", public_reply_enabled=True, public_replies=["Sent you a DM!"], **fields
    )


def _replies(world: World, comment_id: str) -> list[str]:
    return [r["text"] for r in world.admin.replies(comment_id=comment_id)]


async def test_a_refused_dm_gets_no_public_reply_until_a_retry_sends_it(world: World) -> None:
    row = await world.comment(campaign_id=await _campaign(world), public=True)
    world.admin.add_fault("messages", "reject", code=551, times=1)
    report = await deliver(world.resources, worker_id="w", dm_log_id=row.id)
    assert (report.private, report.public) == ("FAILED", "waiting for the DM")
    assert _replies(world, row.trigger_id) == []
    log = await world.log(row.id)
    assert log.pub_state is LegState.PENDING
    assert log.pub_error_message == WAITING_FOR_DM
    assert log.pub_next_attempt_at == log.deadline_at  # never due on its own before then
    # Another run of the row (the relay, a duplicate job) posts nothing.
    await deliver(world.resources, worker_id="w2", dm_log_id=row.id)
    assert _replies(world, row.trigger_id) == []

    # The creator retries; the DM goes out, and then the public reply, once.
    await world.execute(
        "UPDATE dm_logs SET pr_state = 'PENDING', pr_next_attempt_at = now() WHERE id = :id",
        id=row.id,
    )
    report = await deliver(world.resources, worker_id="w", dm_log_id=row.id)
    assert (report.private, report.public) == ("SENT", "SENT")
    await deliver(world.resources, worker_id="w2", dm_log_id=row.id)
    assert _replies(world, row.trigger_id) == ["Sent you a DM!"]
    assert (await world.log(row.id)).pub_state is LegState.SENT


async def test_a_dm_skipped_as_a_duplicate_gets_no_public_reply(world: World) -> None:
    campaign = await _campaign(world)
    first = await world.comment(campaign_id=campaign, public=True)
    second = await world.comment(text="RECIPE again", campaign_id=campaign, public=True)
    assert (await deliver(world.resources, worker_id="w", dm_log_id=first.id)).public == "SENT"
    report = await deliver(world.resources, worker_id="w", dm_log_id=second.id)
    assert report.private == LegState.SKIPPED_DEDUP.value
    assert _replies(world, second.trigger_id) == []
    assert (await world.log(second.id)).pub_state is LegState.PENDING


async def test_an_unconfirmed_dm_gets_its_public_reply_once_the_inbox_check_finds_it(
    world: World,
) -> None:
    row = await world.comment(campaign_id=await _campaign(world), public=True)
    world.admin.add_fault("messages", "deliver_then_error", code=1, times=1)
    report = await deliver(world.resources, worker_id="w", dm_log_id=row.id)
    assert (report.private, report.public) == ("UNCONFIRMED", "waiting for the DM")
    assert _replies(world, row.trigger_id) == []

    assert (await verify_unconfirmed(world.resources, row.id)).status == "confirmed"
    assert f"deliver:{row.id}" in await queued_keys(world.resources)
    report = await deliver(world.resources, worker_id="w", dm_log_id=row.id)
    assert report.public == "SENT"
    assert _replies(world, row.trigger_id) == ["Sent you a DM!"]


async def test_a_reply_that_does_not_mention_the_dm_is_posted_whatever_happens(
    world: World,
) -> None:
    campaign = await world.campaign(
        name="Just thanks",
        public_reply_enabled=True,
        public_replies=["Thank you!"],
        public_reply_after_dm=False,
    )
    row = await world.comment(campaign_id=campaign, public=True)
    world.admin.add_fault("messages", "reject", code=551, times=1)
    report = await deliver(world.resources, worker_id="w", dm_log_id=row.id)
    assert (report.public, report.private) == ("SENT", "FAILED")
    assert _replies(world, row.trigger_id) == ["Thank you!"]
