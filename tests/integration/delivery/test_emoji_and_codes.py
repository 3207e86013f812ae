"""Emoji keywords and number codes through the real path: the sandbox's webhook, ingest, the
ledger's decision, the worker's send — each comment answered once, however often Meta sends it."""

from __future__ import annotations

from sqlalchemy import select

from app.db.models import Comment, TriggerKind
from tests.integration.delivery.conftest import LEMON_REEL, World
from tests.integration.delivery.conversations import (
    ACCOUNT,
    Hooks,
    kinds,
    logs,
    reveals,
    run_due,
    two_step_campaign,
)


async def ledger_row(world: World, comment_id: str) -> Comment:
    async with world.resources.sessionmaker() as session:
        row = await session.scalar(select(Comment).where(Comment.comment_id == comment_id))
        assert row is not None
        return row


async def test_an_emoji_comment_gets_its_dm_once(world: World) -> None:
    hooks = Hooks(world)
    fire = await two_step_campaign(world, name="Fire", keywords=["🔥"])
    made = world.admin.fan_comment("jane.doe", LEMON_REEL, "🔥🔥")
    toned = world.admin.fan_comment("marco_rossi", LEMON_REEL, "👍🏽 fire")
    summary = await hooks.deliver("comments", copies=3)  # Meta redelivers
    assert summary["deliveries"] == 1, summary

    [row] = await logs(world, TriggerKind.COMMENT)
    assert (row.campaign_id, row.trigger_id, row.matched_keyword) == (fire, made["id"], "🔥")
    decision = (await ledger_row(world, made["id"])).decision
    assert decision is not None
    assert decision["matched_keyword"] == "🔥"
    assert "read_as_digits" not in decision
    missed = await ledger_row(world, toned["id"])
    assert missed.decision is not None
    assert missed.decision["miss_reason"] == "no_keyword"

    await run_due(world)
    await hooks.deliver("comments", copies=2)  # and again, after the send
    await run_due(world)
    assert kinds(await logs(world)) == [("comment", "reveal", "SENT")]
    assert len(reveals(world, "jane.doe")) == 1
    assert world.stats(made["id"])["send_requests"] == 1


async def test_a_number_code_typed_with_a_letter_is_answered_and_says_so(world: World) -> None:
    hooks = Hooks(world)
    code = await two_step_campaign(world, name="Code", keywords=["2024"])
    read = world.admin.fan_comment("jane.doe", LEMON_REEL, "code 2O24 please")
    longer = world.admin.fan_comment("marco_rossi", LEMON_REEL, "12O245")
    letters = world.admin.fan_comment("olga.petrova", LEMON_REEL, "lOl")
    await hooks.deliver("comments", copies=2)

    [row] = await logs(world, TriggerKind.COMMENT)
    assert (row.campaign_id, row.trigger_id, row.matched_keyword) == (code, read["id"], "2024")
    decision = (await ledger_row(world, read["id"])).decision
    assert decision is not None
    assert decision["read_as_digits"] == "2O24"
    assert decision["considered"][-1] == {
        "campaign_id": code,
        "name": "Code",
        "verdict": "won",
        "keyword": "2024",
        "read_as_digits": "2O24",
    }
    for miss in (longer, letters):
        decision = (await ledger_row(world, miss["id"])).decision
        assert decision is not None
        assert decision["miss_reason"] == "no_keyword"

    await run_due(world)
    assert kinds(await logs(world)) == [("comment", "reveal", "SENT")]
    assert len(reveals(world, "jane.doe")) == 1


async def test_an_emoji_dm_fires_the_dm_trigger_once(world: World) -> None:
    hooks = Hooks(world)
    fire = await two_step_campaign(world, name="Fire DM", keywords=["🙏"], dm_trigger_enabled=True)
    world.admin.fan_dm("yamada.hanako", ACCOUNT, "🙏🏾🙏🏾")
    summary = await hooks.deliver("messages", copies=2)
    assert summary["dm_deliveries"] == 1
    [row] = await logs(world, TriggerKind.MESSAGE)
    assert (row.campaign_id, row.matched_keyword) == (fire, "🙏")
    await run_due(world)
    assert len(reveals(world, "yamada.hanako")) == 1
