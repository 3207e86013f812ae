"""Follow-ups: a durable row scheduled when a reveal is SENT after a tap or a DM, sent once at
interaction + delay, skipped once the 24-hour window has closed, never resent when unsure."""

from __future__ import annotations

import math
from datetime import timedelta

from app.db.engine import autocommit
from app.db.models import AttemptClass, DmLog, LegState, MessageKind, TriggerKind
from app.delivery.recovery import sweeps
from app.delivery.recovery.inbox_check import verify_unconfirmed
from app.queue import JobName
from tests.integration.delivery.conftest import LEMON_REEL, World
from tests.integration.delivery.conversations import (
    ACCOUNT,
    Hooks,
    count,
    kinds,
    logs,
    make_due,
    one,
    run_due,
    text_of,
    two_step_campaign,
)

FOLLOW_UP = {
    "opening_dm_enabled": True,
    "opening_dm_text": "Tap for the recipe",
    "opening_dm_button_title": "Send it",
    "follow_up_enabled": True,
    "follow_up_text": "Did you bake it, {username}? Show me!",
    "follow_up_delay_minutes": 5,
}
FOLLOW_UP_TEXT = "Did you bake it, {fan}? Show me!"


async def _revealed(world: World, hooks: Hooks, fan: str = "jane.doe", **fields: object) -> DmLog:
    """Comment → opening DM → tap → reveal SENT; returns the tap's row."""
    await two_step_campaign(world, **(FOLLOW_UP | fields))
    world.admin.fan_comment(fan, LEMON_REEL, "RECIPE")
    await hooks.deliver("comments")
    await run_due(world)
    world.admin.fan_tap(fan, ACCOUNT)
    await hooks.deliver("messaging_postbacks")
    await run_due(world)
    tap = await one(world, TriggerKind.POSTBACK)
    assert tap.pr_state is LegState.SENT
    return tap


def _sent_to(world: World, fan: str, text: str) -> int:
    return sum(1 for m in world.inbox(fan) if text_of(m) == text)


async def test_a_follow_up_is_scheduled_at_interaction_plus_delay_and_sent_once(
    world: World,
) -> None:
    hooks = Hooks(world)
    tap = await _revealed(world, hooks)
    follow_up = await one(world, TriggerKind.FOLLOW_UP)
    assert follow_up.trigger_id == f"followup:{tap.id}"
    assert follow_up.source_log_id == tap.id
    assert follow_up.message_kind is MessageKind.FOLLOW_UP
    assert follow_up.message_text == FOLLOW_UP_TEXT.format(fan="jane.doe")
    assert follow_up.trigger_text == follow_up.message_text  # what the log shows for it
    assert follow_up.recipient_id == tap.recipient_id
    assert tap.deadline_at is not None
    tapped_at = tap.deadline_at - timedelta(hours=24)
    assert follow_up.pr_next_attempt_at == tapped_at + timedelta(minutes=5)
    assert follow_up.deadline_at == tap.deadline_at
    assert follow_up.pr_state is LegState.PENDING
    # Its job waits in the queue for that moment.
    due = math.ceil(tapped_at.timestamp() + 300)
    job = await world.resources.queue.job(f"deliver:{follow_up.id}:{due}")
    assert job is not None
    assert job.function == JobName.SEND_FOLLOW_UP

    assert await run_due(world) == [], "not before its time"
    # Edits after scheduling do not change the message.
    await world.execute(
        "UPDATE campaigns SET follow_up_text = 'Changed!' WHERE id = :id", id=tap.campaign_id
    )
    await make_due(world, follow_up.id)
    [report] = await run_due(world)
    assert report.private == "SENT"
    await make_due(world, follow_up.id)
    assert await run_due(world) == []
    assert _sent_to(world, "jane.doe", FOLLOW_UP_TEXT.format(fan="jane.doe")) == 1
    assert [m["kind"] for m in world.inbox("jane.doe")] == ["private_reply", "dm", "dm"]
    [attempt] = await world.attempts(follow_up.id)
    assert attempt.classification is AttemptClass.SENT
    assert attempt.request_kind == "text"


async def test_no_follow_up_after_a_link_sent_as_the_private_reply(world: World) -> None:
    """Meta allows nothing after a private reply until the person writes or taps."""
    hooks = Hooks(world)
    await two_step_campaign(world, follow_up_enabled=True, follow_up_text="Thanks!")
    world.admin.fan_comment("marco_rossi", LEMON_REEL, "RECIPE")
    await hooks.deliver("comments")
    await run_due(world)
    assert kinds(await logs(world)) == [("comment", "reveal", "SENT")]


async def test_a_dm_trigger_reveal_gets_its_follow_up_without_delay(world: World) -> None:
    hooks = Hooks(world)
    await two_step_campaign(
        world,
        dm_trigger_enabled=True,
        follow_up_enabled=True,
        follow_up_text="Anything else?",
        follow_up_delay_minutes=0,
    )
    world.admin.fan_dm("olga.petrova", ACCOUNT, "recipe")
    await hooks.deliver("messages")
    await run_due(world)
    assert kinds(await logs(world)) == [
        ("message", "reveal", "SENT"),
        ("follow_up", "follow_up", "SENT"),
    ]
    assert _sent_to(world, "olga.petrova", "Anything else?") == 1


async def test_a_follow_up_past_the_window_is_skipped(world: World) -> None:
    hooks = Hooks(world)
    await _revealed(world, hooks)
    follow_up = await one(world, TriggerKind.FOLLOW_UP)
    await world.execute(
        "UPDATE dm_logs SET deadline_at = now() - interval '1 minute', "
        "pr_next_attempt_at = now() - interval '2 minutes' WHERE id = :id",
        id=follow_up.id,
    )
    requests_before = len(world.admin.requests(endpoint="messages"))
    [report] = await run_due(world)
    assert report.private == "SKIPPED_WINDOW_EXPIRED"
    row = await world.log(follow_up.id)
    assert row.pr_state is LegState.SKIPPED_WINDOW_EXPIRED
    assert row.pr_error_message == "the 24-hour messaging window closed"
    assert len(world.admin.requests(endpoint="messages")) == requests_before


async def test_the_relay_settles_an_expired_follow_up_nobody_ran(world: World) -> None:
    hooks = Hooks(world)
    await _revealed(world, hooks)
    follow_up = await one(world, TriggerKind.FOLLOW_UP)
    await world.execute(
        "UPDATE dm_logs SET deadline_at = now() - interval '1 minute' WHERE id = :id",
        id=follow_up.id,
    )
    async with autocommit(world.resources.engine) as conn:
        relayed = await sweeps.relay_due_work(conn, world.resources.queue, grace_s=0)
    assert relayed.expired == 1
    row = await world.log(follow_up.id)
    assert row.pr_state is LegState.SKIPPED_WINDOW_EXPIRED
    assert row.pr_error_message == "the 24-hour messaging window closed while waiting"


async def test_meta_refusing_a_late_follow_up_skips_it(world: World) -> None:
    hooks = Hooks(world)
    await _revealed(world, hooks)
    follow_up = await one(world, TriggerKind.FOLLOW_UP)
    world.admin.advance_clock(25 * 3600)  # the sandbox's window has closed, our clock has not
    await make_due(world, follow_up.id)
    [report] = await run_due(world)
    assert report.private == "SKIPPED_WINDOW_EXPIRED"
    row = await world.log(follow_up.id)
    assert (row.pr_error_code, row.pr_error_subcode) == (10, 2534022)
    [attempt] = await world.attempts(follow_up.id)
    assert attempt.classification is AttemptClass.REJECTED


async def test_an_ambiguous_follow_up_is_unconfirmed_and_never_resent(world: World) -> None:
    hooks = Hooks(world)
    await _revealed(world, hooks, "lucia.mendez")
    follow_up = await one(world, TriggerKind.FOLLOW_UP)
    world.admin.add_fault("messages", "deliver_then_error", code=1, times=1)
    await make_due(world, follow_up.id)
    [report] = await run_due(world)
    assert report.private == "UNCONFIRMED"
    text = FOLLOW_UP_TEXT.format(fan="lucia.mendez")
    assert _sent_to(world, "lucia.mendez", text) == 1
    requests = len(world.admin.requests(endpoint="messages"))

    await make_due(world, follow_up.id)
    await run_due(world)
    async with autocommit(world.resources.engine) as conn:
        await sweeps.relay_due_work(conn, world.resources.queue, grace_s=0)
        await sweeps.sweep_stale_claims(conn, None, older_than_s=0)
    await run_due(world)
    assert len(world.admin.requests(endpoint="messages")) == requests
    assert (await world.log(follow_up.id)).pr_state is LegState.UNCONFIRMED

    result = await verify_unconfirmed(world.resources, follow_up.id)
    assert result.status == "confirmed", result
    assert (await world.log(follow_up.id)).pr_state is LegState.SENT
    assert _sent_to(world, "lucia.mendez", text) == 1


async def test_an_unconfirmed_reveal_gets_its_follow_up_once_confirmed(world: World) -> None:
    hooks = Hooks(world)
    await two_step_campaign(world, **FOLLOW_UP)
    world.admin.fan_comment("zoe.lefevre", LEMON_REEL, "RECIPE")
    await hooks.deliver("comments")
    await run_due(world)
    world.admin.fan_tap("zoe.lefevre", ACCOUNT)
    await hooks.deliver("messaging_postbacks")
    world.admin.add_fault("messages", "deliver_then_reset", times=1)
    [report] = await run_due(world)
    assert report.private == "UNCONFIRMED"
    assert await logs(world, TriggerKind.FOLLOW_UP) == []
    tap = await one(world, TriggerKind.POSTBACK)
    result = await verify_unconfirmed(world.resources, tap.id)
    assert result.status == "confirmed", result
    follow_up = await one(world, TriggerKind.FOLLOW_UP)
    assert follow_up.source_log_id == tap.id
    assert follow_up.message_text == FOLLOW_UP_TEXT.format(fan="zoe.lefevre")


async def test_turning_follow_ups_off_skips_the_scheduled_ones(world: World) -> None:
    hooks = Hooks(world)
    tap = await _revealed(world, hooks, "priya.cooks")
    follow_up = await one(world, TriggerKind.FOLLOW_UP)
    await world.execute(
        "UPDATE campaigns SET follow_up_enabled = false WHERE id = :id", id=tap.campaign_id
    )
    await make_due(world, follow_up.id)
    [report] = await run_due(world)
    assert report.private == "SKIPPED_CAMPAIGN_INACTIVE"
    assert (
        await count(
            world, "SELECT count(*) FROM delivery_attempts WHERE dm_log_id = :id", id=follow_up.id
        )
        == 0
    )
