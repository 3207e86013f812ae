"""The follow gate: the link only goes to followers, with Meta's follow lag taken into account.

A comment cannot be checked (no consent yet: code 230), so its private reply is the prompt (or
the opening DM). After a tap: follows → link; not yet → re-checks, then the prompt again (one
INFO event); unknown → link (fail open). After a DM: unknown → prompt (fail closed).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import select

from app.db.models import EventLevel, LegState, MessageKind, OperationalEvent, TriggerKind
from app.delivery.content.follow_gate import CHECKING_PAYLOAD, CHECKING_TEXT
from tests.integration.delivery.conftest import LEMON_REEL, World
from tests.integration.delivery.conversations import (
    ACCOUNT,
    Hooks,
    buttons_of,
    kinds,
    logs,
    make_due,
    one,
    reveals,
    run_due,
    text_of,
    two_step_campaign,
)

GATE = {
    "follow_gate_enabled": True,
    "follow_prompt_text": "Follow @sunny.bakes first, {username}, then tap.",
    "follow_prompt_button_title": "I'm following",
}
OPENING = {
    "opening_dm_enabled": True,
    "opening_dm_text": "Tap for the recipe",
    "opening_dm_button_title": "Send it",
}


async def _prompted(world: World, hooks: Hooks, fan: str, **fields: object) -> int:
    campaign = await two_step_campaign(world, **(GATE | fields))
    world.admin.fan_comment(fan, LEMON_REEL, "RECIPE")
    await hooks.deliver("comments")
    await run_due(world)
    return campaign


async def _tap(world: World, hooks: Hooks, fan: str) -> None:
    world.admin.fan_tap(fan, ACCOUNT)
    await hooks.deliver("messaging_postbacks")


async def _events(world: World) -> list[OperationalEvent]:
    async with world.resources.sessionmaker() as session:
        rows = await session.scalars(
            select(OperationalEvent).where(OperationalEvent.kind == "follow_gate_refused")
        )
        return list(rows)


async def test_a_non_follower_is_checked_again_then_asked_again(world: World) -> None:
    hooks = Hooks(world)
    campaign = await _prompted(world, hooks, "olga.petrova")
    comment_row = await one(world, TriggerKind.COMMENT)
    assert comment_row.message_kind is MessageKind.FOLLOW_PROMPT
    [prompt] = world.inbox("olga.petrova")
    assert text_of(prompt) == "Follow @sunny.bakes first, olga.petrova, then tap."
    assert buttons_of(prompt) == [
        {"type": "postback", "title": "I'm following", "payload": f"followcheck:{campaign}"}
    ]

    await _tap(world, hooks, "olga.petrova")
    delays = world.resources.settings.follow_recheck_delays_s
    for check, delay in enumerate(delays, start=1):
        before = datetime.now(UTC)
        report, *note = await run_due(world)
        assert report.private == "checking again", report
        # The first "not yet" tells the person at once, in a message of its own, once.
        assert [r.private for r in note] == (["SENT"] if check == 1 else [])
        assert text_of(world.inbox("olga.petrova")[-1]) == CHECKING_TEXT
        tap_row = await one(world, TriggerKind.POSTBACK)
        assert tap_row.pr_state is LegState.PENDING
        assert tap_row.pr_evidence is not None
        assert len(tap_row.pr_evidence["follow_checks"]) == check
        assert tap_row.pr_next_attempt_at is not None
        wait = tap_row.pr_next_attempt_at - before
        assert timedelta(seconds=delay - 1) <= wait <= timedelta(seconds=delay + 2)
        assert tap_row.pr_error_message
        assert "checking again" in tap_row.pr_error_message
        assert await run_due(world) == [], "nothing runs before the re-check is due"
        await make_due(world, tap_row.id)

    [report] = await run_due(world)
    assert report.private == "SENT"
    tap_row = await one(world, TriggerKind.POSTBACK)
    assert tap_row.message_kind is MessageKind.FOLLOW_PROMPT
    assert tap_row.pr_error_message is None
    assert tap_row.pr_evidence is not None
    assert tap_row.pr_evidence["follow_gate"]["follows"] is False
    prompts = world.inbox("olga.petrova")
    assert [b["payload"] for m in prompts for b in buttons_of(m)] == [f"followcheck:{campaign}"] * 2
    assert [text_of(m) for m in prompts].count(CHECKING_TEXT) == 1
    assert reveals(world, "olga.petrova") == []
    [event] = await _events(world)
    assert event.level is EventLevel.INFO
    assert event.workspace_id == world.workspace_id
    assert "follow gate refused a tap" in event.message

    # The prompt's button works again: a new tap, a new check.
    world.admin.fan_follow("olga.petrova", ACCOUNT)
    await _tap(world, hooks, "olga.petrova")
    await run_due(world)
    assert kinds(await logs(world, TriggerKind.POSTBACK)) == [
        ("postback", "follow_prompt", "SENT"),
        ("postback", "reveal", "SENT"),
    ]
    assert len(reveals(world, "olga.petrova")) == 1


async def test_a_new_follower_gets_the_link_once_instagram_catches_up(world: World) -> None:
    hooks = Hooks(world)
    world.admin.update_settings(follow_lag_seconds=60)
    await _prompted(world, hooks, "zoe.lefevre")
    world.admin.fan_follow("zoe.lefevre", ACCOUNT)  # just before tapping "I'm following"
    await _tap(world, hooks, "zoe.lefevre")
    report, note = await run_due(world)
    assert (report.private, note.private) == ("checking again", "SENT")
    assert text_of(world.inbox("zoe.lefevre")[-1]) == CHECKING_TEXT
    world.admin.advance_clock(61)  # Meta's follow status catches up
    await make_due(world, (await one(world, TriggerKind.POSTBACK)).id)
    [report] = await run_due(world)
    assert report.private == "SENT"
    tap_row = await one(world, TriggerKind.POSTBACK)
    assert tap_row.message_kind is MessageKind.REVEAL
    assert tap_row.pr_evidence is not None
    assert len(tap_row.pr_evidence["follow_checks"]) == 1
    assert tap_row.pr_evidence["follow_gate"]["follows"] is True
    assert len(reveals(world, "zoe.lefevre")) == 1
    assert await _events(world) == []


async def test_opening_dm_then_gate_follower_and_non_follower(world: World) -> None:
    """Order: opening DM → follow gate → link. The opening DM's button checks right away, and
    a non-follower is asked to follow without waiting for re-checks."""
    hooks = Hooks(world)
    campaign = await two_step_campaign(world, **(GATE | OPENING))
    for fan in ("jane.doe", "lucia.mendez"):  # jane follows @sunny.bakes, lucia does not
        world.admin.fan_comment(fan, LEMON_REEL, "RECIPE")
    await hooks.deliver("comments")
    await run_due(world)
    for fan in ("jane.doe", "lucia.mendez"):
        [opening] = world.inbox(fan)
        assert [b["payload"] for b in buttons_of(opening)] == [f"followcheck:{campaign}:open"]
        await _tap(world, hooks, fan)
    await run_due(world)
    assert len(reveals(world, "jane.doe")) == 1
    assert reveals(world, "lucia.mendez") == []
    [_, prompt] = world.inbox("lucia.mendez")
    assert [b["payload"] for b in buttons_of(prompt)] == [f"followcheck:{campaign}"]

    world.admin.fan_follow("lucia.mendez", ACCOUNT)
    await _tap(world, hooks, "lucia.mendez")
    await run_due(world)
    assert len(reveals(world, "lucia.mendez")) == 1
    assert await _events(world) == []


async def test_unknown_follow_status_after_a_tap_sends_the_link(world: World) -> None:
    hooks = Hooks(world)
    await _prompted(world, hooks, "sam.okafor")
    world.admin.add_fault("user_profile", "reject", code=2, http_status=503)
    await _tap(world, hooks, "sam.okafor")
    [report] = await run_due(world)
    assert report.private == "SENT"
    tap_row = await one(world, TriggerKind.POSTBACK)
    assert tap_row.message_kind is MessageKind.REVEAL
    assert tap_row.pr_evidence is not None
    assert tap_row.pr_evidence["follow_gate"]["follows"] is None
    assert "fail open" in tap_row.pr_evidence["follow_gate"]["why"]
    assert len(reveals(world, "sam.okafor")) == 1


async def test_the_dm_trigger_path_fails_closed(world: World) -> None:
    hooks = Hooks(world)
    await two_step_campaign(world, **GATE, dm_trigger_enabled=True)
    world.admin.fan_dm("marco_rossi", ACCOUNT, "recipe please")  # follows
    world.admin.fan_dm("zoe.lefevre", ACCOUNT, "RECIPE?")  # does not
    world.admin.fan_dm("sam.okafor", ACCOUNT, "the recipe")  # unknown (fault below)
    world.admin.add_fault("user_profile", "reject", code=1, recipient="sam.okafor")
    await hooks.deliver("messages")
    await run_due(world)
    assert len(reveals(world, "marco_rossi")) == 1
    for fan in ("zoe.lefevre", "sam.okafor"):
        assert reveals(world, fan) == [], fan
        [prompt] = world.inbox(fan)
        assert [b["type"] for b in buttons_of(prompt)] == ["postback"]
    rows = {row.recipient_id: row for row in await logs(world, TriggerKind.MESSAGE)}
    assert sorted(r.message_kind.value for r in rows.values() if r.message_kind) == [
        "follow_prompt",
        "follow_prompt",
        "reveal",
    ]
    unknown = [
        r
        for r in rows.values()
        if r.pr_evidence and r.pr_evidence["follow_gate"]["follows"] is None
    ]
    assert len(unknown) == 1
    assert unknown[0].message_kind is MessageKind.FOLLOW_PROMPT


async def test_the_log_names_what_a_tap_row_sent(world: World) -> None:
    """A tap answered with the follow prompt reads "Sent · the request to follow", not a bare
    SENT that looks like the link went out; the checking note is named too."""
    from app.delivery_log.filters import LogFilter
    from app.delivery_log.queries import fetch_page

    hooks = Hooks(world)
    await _prompted(world, hooks, "olga.petrova")
    await _tap(world, hooks, "olga.petrova")
    for _ in world.resources.settings.follow_recheck_delays_s:
        await run_due(world)
        await make_due(world, (await one(world, TriggerKind.POSTBACK)).id)
    await run_due(world)
    async with world.resources.sessionmaker() as session:
        page = await fetch_page(session, world.workspace_id, LogFilter())
    said = {
        (row.trigger_kind.value, row.message_kind, row.trigger_payload == CHECKING_PAYLOAD)
        for row in page.rows
    }
    assert said == {
        ("comment", MessageKind.FOLLOW_PROMPT, False),
        ("postback", MessageKind.FOLLOW_PROMPT, False),
        ("follow_up", MessageKind.FOLLOW_UP, True),
    }
