"""Story triggers: a reply to one of the account's stories, or a story that mentions the
account, gets the campaign's DM once — whatever Meta redelivers — by the person's IGSID inside
the 24-hour window the reply or mention opened, never touching the private-reply budget."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from app.db.engine import autocommit
from app.db.models import (
    CampaignTrigger,
    LegState,
    MatchMode,
    MessageKind,
    MessagingEventKind,
    MessagingMissReason,
    TriggerKind,
)
from app.delivery.intake.outbox import run_ingest
from app.delivery.recovery import sweeps
from app.delivery.recovery.inbox_check import verify_unconfirmed
from app.delivery.send.budget import budget_key
from app.delivery.send.dispatch import deliver
from tests.integration.delivery.conftest import SUNNY, World
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
from tests.support.processes import free_port, start_web, start_worker
from tests.support.webhooks import messaging_body, store_event

# The sandbox signs with its own default secret; the web process checks that one.
SANDBOX_SECRET = "sandbox-instagram-app-secret"


async def story_campaign(world: World, **fields: object) -> int:
    values: dict[str, object] = {
        "name": "Story replies",
        "trigger": CampaignTrigger.STORY_REPLIES,
        "keywords": ["loaf"],
    }
    return await two_step_campaign(world, **(values | fields))


async def test_a_story_reply_with_the_keyword_gets_the_link_once(world: World) -> None:
    hooks = Hooks(world)
    campaign = await story_campaign(world)
    story = world.admin.publish_story(ACCOUNT, "Reply LOAF for the recipe")
    sent = world.admin.fan_story_reply("yamada.hanako", ACCOUNT, story["id"], "LOAF please!")
    summary = await hooks.deliver("messages", copies=3)  # Meta redelivers the reply
    assert summary["dm_deliveries"] == 1
    row = await one(world, TriggerKind.STORY_REPLY)
    assert row.trigger_id == f"story:{sent['mid']}"
    assert row.campaign_id == campaign
    assert row.matched_keyword == "loaf"
    assert row.trigger_text == "LOAF please!"
    assert row.media_id == story["id"]
    assert row.deadline_at is not None
    [event] = [e for e in await ledger(world) if e.kind is MessagingEventKind.MESSAGE]
    assert event.miss_reason is None
    assert event.opens_window
    assert event.details is not None
    assert event.details["story_id"] == story["id"]

    [report] = await run_due(world)
    assert report.private == "SENT"
    row = await one(world, TriggerKind.STORY_REPLY)
    assert row.message_kind is MessageKind.REVEAL
    [reveal] = world.inbox("yamada.hanako")
    assert reveal["kind"] == "dm"  # by IGSID, not a private reply
    assert reveal["comment_id"] is None
    assert text_of(reveal) == "Here it is, there!"
    assert [destination_of(b["url"]) for b in buttons_of(reveal)] == [LINK["url"]]
    # A story reply is a DM: it takes nothing from the hourly private-reply budget.
    assert await world.resources.redis.zcard(budget_key(world.account_id)) == 0

    # The same person replies again: they already have the link.
    world.admin.fan_story_reply("yamada.hanako", ACCOUNT, story["id"], "loaf again")
    await hooks.deliver("messages", copies=2)
    await run_due(world)
    assert kinds(await logs(world)) == [
        ("story_reply", "reveal", "SENT"),
        ("story_reply", "reveal", "SKIPPED_DEDUP"),
    ]
    assert len(reveals(world, "yamada.hanako")) == 1


async def test_a_campaign_on_one_story_answers_it_while_live_and_beats_an_every_story_one(
    world: World,
) -> None:
    hooks = Hooks(world)
    chosen = world.admin.publish_story(ACCOUNT, "This one")
    other = world.admin.publish_story(ACCOUNT, "Another")
    everywhere = await story_campaign(world, name="Every story", priority=50)
    expires = datetime.now(UTC) + timedelta(hours=23)
    one_story = await story_campaign(
        world,
        name="One story",
        story_id=chosen["id"],
        story_expires_at=expires,
        match_mode=MatchMode.ANY_COMMENT,
        keywords=[],
    )
    world.admin.fan_story_reply("jane.doe", ACCOUNT, chosen["id"], "😍")
    world.admin.fan_story_reply("marco_rossi", ACCOUNT, other["id"], "loaf")
    world.admin.fan_story_reply("olga.petrova", ACCOUNT, other["id"], "wow")
    await hooks.deliver("messages")
    rows = await logs(world, TriggerKind.STORY_REPLY)
    by_person = {row.trigger_text: row.campaign_id for row in rows}
    # Any reply to the chosen story (an emoji too); only the keyword elsewhere.
    assert by_person == {"😍": one_story, "loaf": everywhere}
    reasons = [e.miss_reason for e in await ledger(world)]
    assert reasons.count(MessagingMissReason.NO_MATCH) == 1

    # Once the chosen story has expired, its campaign answers no more replies.
    await world.execute(
        "UPDATE campaigns SET story_expires_at = now() - interval '1 second' WHERE id = :id",
        id=one_story,
    )
    world.admin.fan_story_reply("priya.cooks", ACCOUNT, chosen["id"], "me too")
    await hooks.deliver("messages")
    assert len(await logs(world, TriggerKind.STORY_REPLY)) == 2


async def test_story_replies_that_do_not_trigger_a_story_campaign(world: World) -> None:
    hooks = Hooks(world)
    await story_campaign(world, excluded_keywords=["refund"])
    dm_campaign = await two_step_campaign(world, name="DM keyword", dm_trigger_enabled=True)
    story = world.admin.publish_story(ACCOUNT, "Reply LOAF")
    world.admin.fan_story_reply("jane.doe", ACCOUNT, story["id"], "loaf refund")  # excluded
    world.admin.fan_story_reply("marco_rossi", ACCOUNT, story["id"], "nice")  # no keyword
    # No story campaign matches, but the reply is still a DM: the DM keyword trigger answers.
    world.admin.fan_story_reply("olga.petrova", ACCOUNT, story["id"], "RECIPE?")
    # A plain DM with the story keyword is no story reply.
    world.admin.fan_dm("priya.cooks", ACCOUNT, "loaf")
    await hooks.deliver("messages")
    [row] = await logs(world, TriggerKind.MESSAGE)
    assert (row.campaign_id, row.trigger_text) == (dm_campaign, "RECIPE?")
    assert await logs(world, TriggerKind.STORY_REPLY) == []
    reasons = sorted(str(e.miss_reason) for e in await ledger(world))
    assert reasons == ["None"] + ["no_match"] * 3
    # Why no story campaign answered, for the misses view; a plain DM is no story miss.
    why = {e.text: (e.details or {}).get("story_miss") for e in await ledger(world)}
    assert why == {
        "loaf refund": "excluded_keyword",
        "nice": "no_keyword",
        "RECIPE?": None,  # the DM keyword trigger answered it
        "loaf": None,
    }


async def test_a_story_reply_before_the_campaign_went_live_or_to_a_paused_one_is_not_its(
    world: World,
) -> None:
    hooks = Hooks(world)
    paused = await story_campaign(world, name="Paused")
    await world.execute("UPDATE campaigns SET status = 'paused' WHERE id = :id", id=paused)
    later = await story_campaign(world, name="Later")
    await world.execute(
        "UPDATE campaigns SET activated_at = now() + interval '1 hour' WHERE id = :id", id=later
    )
    story = world.admin.publish_story(ACCOUNT, "Reply LOAF")
    world.admin.fan_story_reply("jane.doe", ACCOUNT, story["id"], "loaf")
    await hooks.deliver("messages")
    assert await logs(world, TriggerKind.STORY_REPLY) == []


async def test_a_story_reply_answered_outside_the_window_is_skipped(world: World) -> None:
    hooks = Hooks(world)
    await story_campaign(world)
    story = world.admin.publish_story(ACCOUNT, "Reply LOAF")
    world.admin.fan_story_reply("priya.cooks", ACCOUNT, story["id"], "loaf")
    await hooks.deliver("messages")
    world.admin.add_fault("messages", "reject", code=10, subcode=2534022, http_status=403)
    [report] = await run_due(world)
    assert report.private == "SKIPPED_WINDOW_EXPIRED"
    row = await one(world, TriggerKind.STORY_REPLY)
    assert row.pr_state is LegState.SKIPPED_WINDOW_EXPIRED
    assert reveals(world, "priya.cooks") == []


async def test_a_story_reply_campaign_with_the_follow_gate_asks_to_follow_first(
    world: World,
) -> None:
    hooks = Hooks(world)
    campaign = await story_campaign(
        world,
        follow_gate_enabled=True,
        follow_prompt_text="Follow me first, then tap",
        follow_prompt_button_title="I'm following",
    )
    story = world.admin.publish_story(ACCOUNT, "Reply LOAF")
    world.admin.fan_story_reply("zoe.lefevre", ACCOUNT, story["id"], "loaf")
    await hooks.deliver("messages")
    await run_due(world)
    [prompt] = world.inbox("zoe.lefevre")
    assert text_of(prompt) == "Follow me first, then tap"
    assert [b["payload"] for b in buttons_of(prompt)] == [f"followcheck:{campaign}"]

    world.admin.fan_follow("zoe.lefevre", ACCOUNT)
    world.admin.fan_tap("zoe.lefevre", ACCOUNT, mid=prompt["mid"])
    await hooks.deliver("messaging_postbacks", copies=2)
    await run_due(world)
    assert len(reveals(world, "zoe.lefevre")) == 1
    assert kinds(await logs(world)) == [
        ("story_reply", "follow_prompt", "SENT"),
        ("postback", "reveal", "SENT"),
    ]


async def test_a_story_mention_gets_the_thank_you_once_per_person(world: World) -> None:
    hooks = Hooks(world)
    campaign = await two_step_campaign(
        world,
        name="Thanks for the mention",
        trigger=CampaignTrigger.STORY_MENTIONS,
        keywords=[],
        dm_text="Thanks for the shout-out! Here's 10% off:",
    )
    sent = world.admin.fan_story_mention("marco_rossi", ACCOUNT)
    summary = await hooks.deliver("messages", copies=3)
    assert summary["dm_deliveries"] == 1
    row = await one(world, TriggerKind.STORY_MENTION)
    assert row.trigger_id == f"mention:{sent['mid']}"
    assert row.campaign_id == campaign
    assert row.trigger_text is None
    [event] = await ledger(world)
    assert event.miss_reason is None
    assert event.details is not None
    assert event.details["story"] == "mention"
    assert event.details["story_url"].startswith("https://")

    [report] = await run_due(world)
    assert report.private == "SENT"
    [thanks] = world.inbox("marco_rossi")
    assert text_of(thanks) == "Thanks for the shout-out! Here's 10% off:"
    assert [destination_of(b["url"]) for b in buttons_of(thanks)] == [LINK["url"]]
    assert await world.resources.redis.zcard(budget_key(world.account_id)) == 0

    # A second mention by the same person: the campaign thanked them already.
    world.admin.fan_story_mention("marco_rossi", ACCOUNT)
    world.admin.fan_story_mention("jane.doe", ACCOUNT)
    await hooks.deliver("messages")
    await run_due(world)
    assert sorted(kinds(await logs(world))) == [
        ("story_mention", "reveal", "SENT"),
        ("story_mention", "reveal", "SENT"),
        ("story_mention", "reveal", "SKIPPED_DEDUP"),
    ]
    assert len(world.inbox("marco_rossi")) == 1


async def test_a_story_mention_without_a_mention_campaign_is_only_recorded(world: World) -> None:
    hooks = Hooks(world)
    await story_campaign(world)  # a story-reply campaign does not answer mentions
    world.admin.fan_story_mention("jane.doe", ACCOUNT)
    await hooks.deliver("messages")
    assert await logs(world) == []
    [event] = await ledger(world)
    assert event.miss_reason is MessagingMissReason.NO_MATCH
    assert event.opens_window
    assert event.details is not None
    assert event.details["story_miss"] == "no_story_campaign"


async def _eventually(check: Callable[[], Awaitable[bool]], *, within_s: float, what: str) -> None:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if await check():
            return
        await asyncio.sleep(0.2)
    raise TimeoutError(f"gave up after {within_s:g} s waiting for {what}")


async def test_story_reply_and_mention_through_web_and_a_worker_each_once(
    world: World, delivery_env: dict[str, str], artifacts_dir: Path
) -> None:
    """The sandbox POSTs each webhook three times to a real web process; a real worker
    ingests and sends: one DM for the reply, one thank-you for the mention."""
    admin = world.admin
    await story_campaign(world)
    await two_step_campaign(
        world,
        name="Mentions",
        trigger=CampaignTrigger.STORY_MENTIONS,
        keywords=[],
        dm_text="Thanks for the mention!",
    )
    story = admin.publish_story(ACCOUNT, "Reply LOAF")
    port = free_port()
    env = {**delivery_env, "INSTAGRAM_APP_SECRET": SANDBOX_SECRET}
    log_dir = artifacts_dir / "story-triggers"
    web = start_web(env, port, log_dir)
    worker = start_worker(env, log_dir, "story-worker")
    try:
        admin.update_settings(require_subscription=False)
        registered = admin.register_webhook(
            f"http://127.0.0.1:{port}/webhooks/instagram", env["WEBHOOK_VERIFY_TOKEN"]
        )
        assert registered["verified"], registered
        admin.add_fault("webhook", "duplicate", count=3)
        admin.fan_story_reply("zoe.lefevre", ACCOUNT, story["id"], "LOAF 🍞")
        admin.fan_story_mention("sam.okafor", ACCOUNT)

        async def settled() -> bool:
            rows = await logs(world)
            return len(rows) == 2 and all(row.pr_state.is_final for row in rows)

        await _eventually(settled, within_s=90, what="the story reply's and mention's DMs")
    finally:
        worker.stop()
        web.stop()
        admin.unregister_webhook()

    assert sorted(kinds(await logs(world))) == [
        ("story_mention", "reveal", "SENT"),
        ("story_reply", "reveal", "SENT"),
    ]
    assert len(reveals(world, "zoe.lefevre")) == 1
    [thanks] = world.inbox("sam.okafor")
    assert text_of(thanks) == "Thanks for the mention!"
    assert len(admin.webhook_attempts()) >= 6, "every webhook was delivered three times"


async def test_a_story_reply_dm_whose_answer_was_lost_is_unconfirmed_never_resent(
    world: World,
) -> None:
    """Meta delivered the DM but answered 500: UNCONFIRMED, nothing sends it again, and the
    inbox check finds it in the conversation."""
    hooks = Hooks(world)
    await story_campaign(world)
    story = world.admin.publish_story(ACCOUNT, "Reply LOAF")
    world.admin.fan_story_reply("olga.petrova", ACCOUNT, story["id"], "loaf")
    await hooks.deliver("messages")
    row = await one(world, TriggerKind.STORY_REPLY)
    world.admin.add_fault("messages", "deliver_then_error", code=1, times=1)
    [report] = await run_due(world)
    assert report.private == "UNCONFIRMED"

    await deliver(world.resources, worker_id="w2", dm_log_id=row.id)
    async with autocommit(world.resources.engine) as conn:
        await sweeps.relay_due_work(conn, world.resources.queue, grace_s=0)
        await sweeps.sweep_stale_claims(conn, None, older_than_s=0)
    await run_due(world)
    assert len(world.inbox("olga.petrova")) == 1
    assert (await world.log(row.id)).pr_state is LegState.UNCONFIRMED

    result = await verify_unconfirmed(world.resources, row.id)
    assert result.status == "confirmed", result
    assert (await world.log(row.id)).pr_state is LegState.SENT


async def test_a_photo_reply_to_a_story_is_answered_only_by_an_any_reply_campaign(
    world: World,
) -> None:
    """A reply with no text (a photo, a sticker): "any reply" answers it, a keyword cannot."""
    await story_campaign(world, name="Keyword")
    any_reply = await story_campaign(
        world, name="Any reply", match_mode=MatchMode.ANY_COMMENT, keywords=[], priority=-5
    )
    story = world.admin.publish_story(ACCOUNT, "Show me your loaf")
    # The sandbox has no photo replies: a message opens the window there as the photo would,
    # and only the photo reply's webhook (built here) is ingested.
    world.admin.fan_dm("jane.doe", ACCOUNT, "hi")
    fan = world.admin.inbox("jane.doe")["igsids"][SUNNY]
    photo = {
        "mid": "aWdf-photo-reply",
        "attachments": [{"type": "image", "payload": {"url": "https://lookaside.fbsbx.com/x"}}],
        "reply_to": {"story": {"url": "https://scontent.cdninstagram.com/s", "id": story["id"]}},
    }
    item = {
        "sender": {"id": fan},
        "recipient": {"id": SUNNY},
        "timestamp": int(time.time() * 1000),
        "message": photo,
    }
    async with world.resources.sessionmaker() as session, session.begin():
        ids = [await store_event(session, messaging_body(item, account=SUNNY)) for _ in range(2)]
    for event_id in ids:
        await run_ingest(world.resources, [event_id])
    row = await one(world, TriggerKind.STORY_REPLY)
    assert row.campaign_id == any_reply
    assert row.trigger_text is None
    [report] = await run_due(world)
    assert report.private == "SENT"
    assert len(world.inbox("jane.doe")) == 1
