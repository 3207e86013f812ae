"""The DM keyword trigger: a fan DMs the keyword and gets the link as a DM, once — whatever
Meta redelivers, and never because of our own echoes."""

from __future__ import annotations

from app.db.models import (
    LegState,
    MessageKind,
    MessagingEventKind,
    MessagingMissReason,
    TriggerKind,
)
from tests.integration.delivery.conftest import World
from tests.integration.delivery.conversations import (
    ACCOUNT,
    LINK,
    Hooks,
    buttons_of,
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


async def test_a_keyword_dm_gets_the_link_once(world: World) -> None:
    hooks = Hooks(world)
    campaign = await two_step_campaign(world, dm_trigger_enabled=True)
    sent = world.admin.fan_dm("yamada.hanako", ACCOUNT, "Could I get the RECIPE? 🙏")
    summary = await hooks.deliver("messages", copies=3)  # Meta redelivers the message
    assert summary["dm_deliveries"] == 1
    row = await one(world, TriggerKind.MESSAGE)
    assert row.trigger_id == f"dm:{sent['mid']}"
    assert row.campaign_id == campaign
    assert row.matched_keyword == "recipe"
    assert row.trigger_text == "Could I get the RECIPE? 🙏"
    assert row.deadline_at is not None

    [report] = await run_due(world)
    assert report.private == "SENT"
    row = await one(world, TriggerKind.MESSAGE)
    assert row.message_kind is MessageKind.REVEAL
    [reveal] = world.inbox("yamada.hanako")
    assert reveal["kind"] == "dm"
    # A DM carries no username: "there" stands in for it.
    assert text_of(reveal) == "Here it is, there!"
    assert [destination_of(b["url"]) for b in buttons_of(reveal)] == [LINK["url"]]

    # The echo of our reveal comes back as a `messages` webhook: a record, never a trigger,
    # even though its text could match.
    await hooks.deliver("messages", copies=2)
    echoes = [e for e in await ledger(world) if e.kind is MessagingEventKind.ECHO]
    assert len(echoes) == 1
    assert echoes[0].miss_reason is MessagingMissReason.ECHO
    assert len(await logs(world)) == 1

    # The same keyword again later: the person already has the link.
    world.admin.fan_dm("yamada.hanako", ACCOUNT, "recipe")
    await hooks.deliver("messages")
    await run_due(world)
    assert kinds(await logs(world)) == [
        ("message", "reveal", "SENT"),
        ("message", "reveal", "SKIPPED_DEDUP"),
    ]
    assert len(reveals(world, "yamada.hanako")) == 1


async def test_dms_that_do_not_trigger(world: World) -> None:
    hooks = Hooks(world)
    await two_step_campaign(world, dm_trigger_enabled=True, excluded_keywords=["refund"])
    other = await two_step_campaign(world, name="Comments only")
    await world.execute("UPDATE campaigns SET keywords = '{cookies}' WHERE id = :id", id=other)
    world.admin.fan_dm("jane.doe", ACCOUNT, "hello there")
    world.admin.fan_dm("marco_rossi", ACCOUNT, "recipe refund please")
    world.admin.fan_dm("olga.petrova", ACCOUNT, "COOKIES")  # that campaign has no DM trigger
    await hooks.deliver("messages")
    assert await logs(world) == []
    reasons = [(e.kind, e.miss_reason) for e in await ledger(world)]
    assert reasons == [(MessagingEventKind.MESSAGE, MessagingMissReason.NO_MATCH)] * 3


async def test_a_dm_answered_outside_the_window_is_skipped(world: World) -> None:
    hooks = Hooks(world)
    await two_step_campaign(world, dm_trigger_enabled=True)
    world.admin.fan_dm("priya.cooks", ACCOUNT, "recipe")
    await hooks.deliver("messages")
    world.admin.add_fault("messages", "reject", code=10, subcode=2534022, http_status=403)
    [report] = await run_due(world)
    assert report.private == "SKIPPED_WINDOW_EXPIRED"
    row = await one(world, TriggerKind.MESSAGE)
    assert row.pr_state is LegState.SKIPPED_WINDOW_EXPIRED
    assert row.pr_error_code == 10
    assert reveals(world, "priya.cooks") == []

    # Nothing was delivered, so the person was not used up: writing again gets the link.
    world.admin.clear_faults()
    world.admin.fan_dm("priya.cooks", ACCOUNT, "recipe please")
    await hooks.deliver("messages")
    await run_due(world)
    assert kinds(await logs(world)) == [
        ("message", "reveal", "SKIPPED_WINDOW_EXPIRED"),
        ("message", "reveal", "SENT"),
    ]
    assert len(reveals(world, "priya.cooks")) == 1
