"""The opening DM ("send me the link"): the private reply is a button template, the tap comes
back as a postback, and the link goes out as a DM exactly once — however often Meta delivers
the tap, however often the fan taps, however many workers race."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from app.db.models import LegState, MessageKind, MessagingMissReason, TriggerKind
from app.delivery.content.postbacks import postback_key
from app.delivery.send.dispatch import deliver
from tests.integration.delivery.conftest import LEMON_REEL, SUNNY, World
from tests.integration.delivery.conversations import (
    ACCOUNT,
    LINK,
    Hooks,
    buttons_of,
    count,
    kinds,
    ledger,
    logs,
    one,
    reveals,
    run_due,
    text_of,
    two_step_campaign,
)
from tests.support.links import destination_of
from tests.support.webhooks import messaging_body, store_event

OPENING = {
    "opening_dm_enabled": True,
    "opening_dm_text": "Want the recipe, {username}? Tap below.",
    "opening_dm_button_title": "Send me the link",
}


async def _opening_dm_sent(world: World, hooks: Hooks, fan: str = "jane.doe") -> int:
    """A fan comments on a two-step campaign's post and gets the opening DM."""
    campaign = await two_step_campaign(world, **OPENING)
    world.admin.fan_comment(fan, LEMON_REEL, "RECIPE please")
    await hooks.deliver("comments")
    await run_due(world)
    return campaign


async def test_the_opening_dm_leads_to_exactly_one_reveal(world: World) -> None:
    hooks = Hooks(world)
    campaign = await _opening_dm_sent(world, hooks)
    comment_row = await one(world, TriggerKind.COMMENT)
    assert comment_row.pr_state is LegState.SENT
    assert comment_row.message_kind is MessageKind.OPENING_DM
    [opening] = world.inbox("jane.doe")
    assert opening["kind"] == "private_reply"
    assert text_of(opening) == "Want the recipe, jane.doe? Tap below."
    assert buttons_of(opening) == [
        {"type": "postback", "title": "Send me the link", "payload": f"reveal:{campaign}:open"}
    ]

    # The fan taps; Meta delivers the tap twice.
    tapped = world.admin.fan_tap("jane.doe", ACCOUNT)
    assert tapped["payload"] == f"reveal:{campaign}:open"
    summary = await hooks.deliver("messaging_postbacks", copies=2)
    assert summary["dm_deliveries"] == 1
    tap_row = await one(world, TriggerKind.POSTBACK)
    assert tap_row.trigger_payload == f"reveal:{campaign}:open"
    assert tap_row.source_log_id == comment_row.id
    assert tap_row.recipient_username == "jane.doe"
    assert tap_row.trigger_text == "Send me the link"
    assert tap_row.deadline_at is not None
    assert tap_row.created_at + timedelta(hours=23) < tap_row.deadline_at
    key = postback_key(world.account_id, campaign, tap_row.recipient_id or "", tapped["mid"])
    assert tap_row.trigger_id == f"postback:{key}"
    assert await count(world, "SELECT count(*) FROM postback_deliveries WHERE id = :k", k=key) == 1

    reports = await run_due(world)
    assert [r.private for r in reports] == ["SENT"]
    tap_row = await one(world, TriggerKind.POSTBACK)
    assert tap_row.message_kind is MessageKind.REVEAL
    [reveal] = reveals(world, "jane.doe")
    assert reveal["kind"] == "dm"
    assert text_of(reveal) == "Here it is, jane.doe!"
    assert [destination_of(b["url"]) for b in buttons_of(reveal)] == [LINK["url"]]

    # A second tap on the same button: a new postback, claimed, but the link went out already.
    world.admin.fan_tap("jane.doe", ACCOUNT)
    await hooks.deliver("messaging_postbacks")
    [again] = await run_due(world)
    # Settled before any message is chosen (the load saw the reveal), not refused by the claim.
    assert "this person already got the link" in again.notes
    assert kinds(await logs(world, TriggerKind.POSTBACK)) == [
        ("postback", "reveal", "SENT"),
        ("postback", "reveal", "SKIPPED_DEDUP"),
    ]
    assert len(reveals(world, "jane.doe")) == 1
    assert len(world.inbox("jane.doe")) == 2

    # Our own sends come back as echoes: recorded, never work.
    await hooks.deliver("messages")
    echoes = [e for e in await ledger(world) if e.kind.value == "echo"]
    assert len(echoes) == 2
    assert all(e.miss_reason is MessagingMissReason.ECHO for e in echoes)
    assert len(await logs(world)) == 3


async def test_two_taps_processed_at_the_same_instant_send_one_reveal(world: World) -> None:
    hooks = Hooks(world)
    await _opening_dm_sent(world, hooks, "marco_rossi")
    world.admin.fan_tap("marco_rossi", ACCOUNT)
    world.admin.fan_tap("marco_rossi", ACCOUNT)
    await hooks.deliver("messaging_postbacks")
    taps = await logs(world, TriggerKind.POSTBACK)
    assert len(taps) == 2
    reports = await asyncio.gather(
        *(
            deliver(world.resources, worker_id=f"w{i}", dm_log_id=row.id)
            for i, row in enumerate(taps * 3)
        )
    )
    # Six jobs for two taps, all at once: one sends, the other tap is refused by the person
    # claim, the rest find the rows claimed or settled.
    outcomes = [r.private for r in reports]
    assert outcomes.count("SENT") == 1, outcomes
    assert outcomes.count("SKIPPED_DEDUP") >= 1, outcomes
    states = sorted(row.pr_state.value for row in await logs(world, TriggerKind.POSTBACK))
    assert states == ["SENT", "SKIPPED_DEDUP"]
    assert len(reveals(world, "marco_rossi")) == 1
    requests = world.admin.requests(endpoint="messages")
    assert len([r for r in requests if r["comment_id"] is None]) == 1, requests


async def test_taps_on_buttons_that_are_not_ours_are_ledger_misses(world: World) -> None:
    other_account_campaign = 987654
    items = [
        {
            "sender": {"id": "1254459154682919"},
            "recipient": {"id": SUNNY},
            "timestamp": 1_900_000_000_000 + n,
            "postback": {"mid": f"pb-{n}", "title": "Tap", "payload": payload},
        }
        for n, payload in enumerate(
            ["GET_STARTED", f"reveal:{other_account_campaign}:open", "reveal:abc", "followcheck:"]
        )
    ]
    async with world.resources.sessionmaker() as session, session.begin():
        event_id = await store_event(session, messaging_body(*items, account=SUNNY))
    from app.delivery.intake.outbox import run_ingest

    summary = await run_ingest(world.resources, [event_id])
    assert "dm_deliveries" not in summary
    assert [e.miss_reason for e in await ledger(world)] == [MessagingMissReason.UNKNOWN_PAYLOAD] * 4
    assert await logs(world) == []
    assert await count(world, "SELECT count(*) FROM postback_deliveries") == 0


async def test_a_tap_for_a_paused_campaign_is_recorded_and_not_sent(world: World) -> None:
    hooks = Hooks(world)
    campaign = await _opening_dm_sent(world, hooks)
    await world.execute("UPDATE campaigns SET status = 'paused' WHERE id = :id", id=campaign)
    world.admin.fan_tap("jane.doe", ACCOUNT)
    await hooks.deliver("messaging_postbacks")
    await run_due(world)
    tap_row = await one(world, TriggerKind.POSTBACK)
    assert tap_row.pr_state is LegState.SKIPPED_CAMPAIGN_INACTIVE
    assert reveals(world, "jane.doe") == []


async def test_the_opening_dm_does_not_block_the_reveal_nor_a_second_comment_dedup(
    world: World,
) -> None:
    """The comment path's person claim (one private reply per person and campaign) and the
    reveal's (one link per person and campaign) are separate."""
    hooks = Hooks(world)
    await _opening_dm_sent(world, hooks, "priya.cooks")
    world.admin.fan_comment("priya.cooks", LEMON_REEL, "recipe again")
    await hooks.deliver("comments")
    world.admin.fan_tap("priya.cooks", ACCOUNT)
    await hooks.deliver("messaging_postbacks")
    await run_due(world)
    assert kinds(await logs(world)) == [
        ("comment", "opening_dm", "SENT"),
        ("comment", "opening_dm", "SKIPPED_DEDUP"),
        ("postback", "reveal", "SENT"),
    ]
    assert len(reveals(world, "priya.cooks")) == 1
    claims = await count(
        world, "SELECT count(*) FROM campaign_recipients WHERE recipient_id IS NOT NULL"
    )
    assert claims == 2
