"""Images and cards in the DM, end to end through the sandbox: a comment's private reply stays
text with buttons; after the tap (or a DM) the image goes just before the link message, or
the card instead of it — exactly once, whatever Meta redelivers or refuses. A refused image
or card never leads to a second private reply."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from app.db.models import AttemptClass, CampaignTrigger, LegState, MessageKind, TriggerKind
from app.delivery.send.dispatch import deliver
from tests.integration.delivery.conftest import LEMON_REEL, World
from tests.integration.delivery.conversations import (
    ACCOUNT,
    LINK,
    Hooks,
    buttons_of,
    logs,
    make_due,
    one,
    run_due,
    text_of,
    two_step_campaign,
)
from tests.support.links import destination_of
from tests.support.sandbox_process import SandboxProcess

OPENING = {
    "opening_dm_enabled": True,
    "opening_dm_text": "Want the recipe, {username}? Tap below.",
    "opening_dm_button_title": "Send me the link",
}


@pytest.fixture
def media(sandbox_process: SandboxProcess) -> str:
    return f"{sandbox_process.base_url}/_media"


def _attachment(message: dict[str, Any]) -> dict[str, Any]:
    attachment = message.get("attachment")
    return attachment if isinstance(attachment, dict) else {}


def _cards(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        _attachment(m)["payload"]["elements"][0]
        for m in messages
        if _attachment(m).get("payload", {}).get("template_type") == "generic"
    ]


def _images(messages: list[dict[str, Any]]) -> list[str]:
    return [
        _attachment(m)["payload"]["url"] for m in messages if _attachment(m).get("type") == "image"
    ]


async def _tapped(world: World, hooks: Hooks, **campaign: Any) -> str:
    """A two-step campaign's opening DM sent to jane.doe's comment, and her tap ingested
    (Meta delivers it twice). Returns the comment id."""
    await two_step_campaign(world, **OPENING, **campaign)
    comment = world.admin.fan_comment("jane.doe", LEMON_REEL, "RECIPE please")
    await hooks.deliver("comments")
    await run_due(world)
    world.admin.fan_tap("jane.doe", ACCOUNT)
    summary = await hooks.deliver("messaging_postbacks", copies=2)
    assert summary["dm_deliveries"] == 1
    return str(comment["id"])


async def test_a_two_step_card_is_delivered_exactly_once(world: World, media: str) -> None:
    hooks = Hooks(world)
    comment_id = await _tapped(
        world,
        hooks,
        dm_image_url=f"{media}/cover.png",
        card_enabled=True,
        card_title="Your lemon loaf, {username}",
        card_subtitle="20 minutes, one bowl",
    )
    # The private reply was the opening DM: a button template, no image, no card.
    [opening] = world.inbox("jane.doe")
    assert opening["kind"] == "private_reply"
    assert _attachment(opening)["payload"]["template_type"] == "button"

    reports = await run_due(world)
    assert [r.private for r in reports] == ["SENT"]
    assert await run_due(world) == []
    await hooks.deliver("messaging_postbacks", copies=3)  # redelivered again later
    assert await run_due(world) == []

    inbox = world.inbox("jane.doe")
    assert len(inbox) == 2
    [card] = _cards(inbox)
    assert card["title"] == "Your lemon loaf, jane.doe"
    assert card["subtitle"] == "20 minutes, one bowl"
    assert card["image_url"] == f"{media}/cover.png"
    assert [destination_of(b["url"]) for b in card["buttons"]] == [LINK["url"]]
    assert destination_of(card["default_action"]["url"]) == LINK["url"]
    assert _images(inbox) == []  # the image is in the card, not sent on its own

    tap = await one(world, TriggerKind.POSTBACK)
    assert (tap.pr_state, tap.message_kind) == (LegState.SENT, MessageKind.REVEAL)
    [attempt] = await world.attempts(tap.id)
    assert (attempt.request_kind, attempt.classification) == ("card", AttemptClass.SENT)
    stats = world.stats(comment_id)
    assert (stats["private_replies_delivered"], stats["send_requests"]) == (1, 1)


async def test_a_dm_trigger_gets_the_image_then_the_link(world: World, media: str) -> None:
    hooks = Hooks(world)
    await two_step_campaign(world, dm_trigger_enabled=True, dm_image_url=f"{media}/cover.gif")
    world.admin.fan_dm("yamada.hanako", ACCOUNT, "RECIPE please")
    await hooks.deliver("messages", copies=2)
    [report] = await run_due(world)
    assert report.private == "SENT"

    inbox = [m for m in world.inbox("yamada.hanako") if m.get("from_business", True)]
    business = [m for m in inbox if m["kind"] == "dm"]
    assert _images(business) == [f"{media}/cover.gif"]
    assert business[0]["mid"] != business[1]["mid"]
    assert _attachment(business[0]).get("type") == "image"  # the image comes first
    assert text_of(business[1]) == "Here it is, there!"
    assert [destination_of(b["url"]) for b in buttons_of(business[1])] == [LINK["url"]]
    row = await one(world, TriggerKind.MESSAGE)
    attempts = await world.attempts(row.id)
    assert [(a.attempt_no, a.request_kind, a.classification) for a in attempts] == [
        (1, "image", AttemptClass.SENT),
        (1, "template", AttemptClass.SENT),
    ]
    assert row.pr_state is LegState.SENT


async def test_a_refused_image_still_sends_the_link_and_no_second_private_reply(
    world: World, media: str
) -> None:
    hooks = Hooks(world)
    comment_id = await _tapped(world, hooks, dm_image_url=f"{media}/huge.jpg")
    [report] = await run_due(world)
    assert report.private == "SENT"
    assert any("image not sent" in note for note in report.notes), report.notes

    inbox = world.inbox("jane.doe")
    assert _images(inbox) == []
    [opening, reveal] = inbox
    assert opening["kind"] == "private_reply"
    assert reveal["kind"] == "dm"
    assert [destination_of(b["url"]) for b in buttons_of(reveal)] == [LINK["url"]]
    tap = await one(world, TriggerKind.POSTBACK)
    attempts = await world.attempts(tap.id)
    assert [(a.request_kind, a.classification, a.meta_subcode) for a in attempts] == [
        ("image", AttemptClass.REJECTED, 2018008),
        ("template", AttemptClass.SENT, None),
    ]
    # The comment's private reply went once; nothing was tried on it again.
    stats = world.stats(comment_id)
    assert (stats["private_replies_delivered"], stats["send_requests"]) == (1, 1)
    assert await run_due(world) == []


async def test_a_refused_card_falls_back_to_the_link_message(world: World, media: str) -> None:
    hooks = Hooks(world)
    comment_id = await _tapped(
        world, hooks, dm_image_url=f"{media}/page.html", card_enabled=True, card_title="Recipe"
    )
    [report] = await run_due(world)
    assert report.private == "SENT"
    [_, reveal] = world.inbox("jane.doe")
    assert _attachment(reveal)["payload"]["template_type"] == "button"
    tap = await one(world, TriggerKind.POSTBACK)
    attempts = await world.attempts(tap.id)
    assert [(a.request_kind, a.classification) for a in attempts] == [
        ("card", AttemptClass.REJECTED),
        ("template", AttemptClass.SENT),
    ]
    stats = world.stats(comment_id)
    assert (stats["private_replies_delivered"], stats["send_requests"]) == (1, 1)


async def test_a_comments_private_reply_never_carries_the_image_or_card(
    world: World, media: str
) -> None:
    # Saved directly (the editor would refuse it live): no tap, no DM trigger.
    await two_step_campaign(
        world, dm_image_url=f"{media}/cover.png", card_enabled=True, card_title="Recipe"
    )
    comment = world.admin.fan_comment("jane.doe", LEMON_REEL, "RECIPE please")
    await Hooks(world).deliver("comments")
    [report] = await run_due(world)
    assert report.private == "SENT"
    [reply] = world.inbox("jane.doe")
    assert reply["kind"] == "private_reply"
    assert _attachment(reply)["payload"]["template_type"] == "button"
    stats = world.stats(str(comment["id"]))
    assert (stats["private_replies_delivered"], stats["send_requests"]) == (1, 1)
    [row] = await logs(world)
    [attempt] = await world.attempts(row.id)
    assert attempt.request_kind == "template"


async def test_a_retry_does_not_show_the_image_twice(world: World, media: str) -> None:
    hooks = Hooks(world)
    await _tapped(world, hooks, dm_image_url=f"{media}/cover.png")
    # The image arrives but its answer is lost (an ambiguous 500); the link message is then
    # refused by a rate limit, so the leg is tried again later.
    world.admin.add_fault("messages", "deliver_then_error", code=2, http_status=500, times=1)
    world.admin.add_fault("messages", "reject", code=4, times=1)
    [report] = await run_due(world)
    assert report.private == "PENDING"
    tap = await one(world, TriggerKind.POSTBACK)
    await make_due(world, tap.id)
    [again] = await run_due(world)
    assert again.private == "SENT"
    assert "image already sent by an earlier call" in again.notes

    inbox = world.inbox("jane.doe")
    assert _images(inbox) == [f"{media}/cover.png"]
    assert len([m for m in inbox if buttons_of(m) and m["kind"] == "dm"]) == 1
    attempts = await world.attempts(tap.id)
    assert [(a.attempt_no, a.request_kind, a.classification) for a in attempts] == [
        (1, "image", AttemptClass.AMBIGUOUS),
        (1, "template", AttemptClass.RETRYABLE),
        (2, "template", AttemptClass.SENT),
    ]


async def test_racing_jobs_send_the_image_and_the_link_once(world: World, media: str) -> None:
    hooks = Hooks(world)
    await _tapped(world, hooks, dm_image_url=f"{media}/cover.png")
    world.admin.fan_tap("jane.doe", ACCOUNT)  # a second tap: a second row for the same person
    await hooks.deliver("messaging_postbacks")
    taps = await logs(world, TriggerKind.POSTBACK)
    assert len(taps) == 2
    reports = await asyncio.gather(
        *(
            deliver(world.resources, worker_id=f"w{i}", dm_log_id=row.id)
            for i, row in enumerate(taps * 3)
        )
    )
    outcomes = [r.private for r in reports]
    assert outcomes.count("SENT") == 1, outcomes
    states = sorted(row.pr_state.value for row in await logs(world, TriggerKind.POSTBACK))
    assert states == ["SENT", "SKIPPED_DEDUP"]
    dms = [m for m in world.inbox("jane.doe") if m["kind"] == "dm"]
    assert _images(dms) == [f"{media}/cover.png"]
    assert len(dms) == 2  # the image, then the link message
    requests = world.admin.requests(endpoint="messages")
    assert len([r for r in requests if r["comment_id"] is None]) == 2, requests


async def test_a_story_reply_gets_the_card(world: World, media: str) -> None:
    hooks = Hooks(world)
    await two_step_campaign(
        world,
        name="Story replies",
        trigger=CampaignTrigger.STORY_REPLIES,
        keywords=["loaf"],
        dm_image_url=f"{media}/cover.png",
        card_enabled=True,
        card_title="The loaf, {username}",
    )
    story = world.admin.publish_story(ACCOUNT, "Reply LOAF for the recipe")
    world.admin.fan_story_reply("yamada.hanako", ACCOUNT, story["id"], "LOAF please!")
    await hooks.deliver("messages", copies=2)
    [report] = await run_due(world)
    assert report.private == "SENT"
    [reveal] = [m for m in world.inbox("yamada.hanako") if m["kind"] == "dm"]
    [card] = _cards([reveal])
    # A story reply carries no username: "there" stands in, as in the text DM.
    assert card["title"] == "The loaf, there"
    assert card["image_url"] == f"{media}/cover.png"
    assert [destination_of(b["url"]) for b in card["buttons"]] == [LINK["url"]]
    row = await one(world, TriggerKind.STORY_REPLY)
    [attempt] = await world.attempts(row.id)
    assert (attempt.request_kind, attempt.classification) == ("card", AttemptClass.SENT)
