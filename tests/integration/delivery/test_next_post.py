"""Next-post binding against the sandbox: an armed campaign takes the next post or reel, its
early comments get their DM once, and competing campaigns are settled deterministically."""

from __future__ import annotations

import asyncio

from app.db.models import CampaignScope, CampaignStatus, CommentOutcome, MissReason, SeenVia
from app.delivery.recovery.next_post import bind_next_posts, request_binding
from app.delivery.recovery.reconcile import reconcile_account
from tests.integration.delivery.conftest import World
from tests.integration.delivery.polling import (
    add_campaign,
    arrive_by_webhook,
    campaign,
    deliver_pending,
    events,
    ledger,
    logs,
)
from tests.support.webhooks import queued_keys


async def armed(world: World, name: str, *, minutes_ago: float, **fields: object) -> int:
    """An active next-post campaign armed (and activated) `minutes_ago`, keyword GUIDE."""
    campaign_id = await add_campaign(
        world, name, scope=CampaignScope.NEXT_POST, keywords=["guide"], **fields
    )
    await world.execute(
        "UPDATE campaigns SET armed_at = now() - make_interval(secs => :s), "
        "activated_at = now() - make_interval(secs => :s) WHERE id = :id",
        s=minutes_ago * 60,
        id=campaign_id,
    )
    return campaign_id


def publish_reel(world: World, caption: str = "New reel! Comment GUIDE") -> str:
    made = world.admin.publish_media(
        "sunny.bakes", caption, media_type="VIDEO", media_product_type="REELS"
    )
    return str(made["id"])


async def test_an_armed_campaign_binds_to_the_next_reel_and_its_early_comment_gets_one_dm(
    world: World,
) -> None:
    waiting = await armed(world, "Guide on my next reel", minutes_ago=1)
    reel = publish_reel(world)
    early = world.admin.fan_comment("jane.doe", reel, "GUIDE please")["id"]

    report = await bind_next_posts(world.resources)

    assert report.bound == [(waiting, reel)]
    assert report.recovered == 1
    bound = await campaign(world, waiting)
    assert (bound.media_id, bound.version, bound.media_caption) == (
        reel,
        2,
        "New reel! Comment GUIDE",
    )
    [notice] = await events(world, "next_post_bound")
    assert notice.details == {"campaign_id": waiting, "media_id": reel}
    assert "reel" in notice.message
    # The comment made between publication and binding is in the ledger, found by polling.
    [row] = await ledger(world)
    assert (row.comment_id, row.campaign_id, row.first_seen_via) == (early, waiting, SeenVia.POLL)
    [sent] = await deliver_pending(world)
    assert sent.private == "SENT"
    assert [m["text"] for m in world.inbox("jane.doe")] == ["Hi jane.doe! Here it is:"]

    # Running again changes nothing.
    again = await bind_next_posts(world.resources)
    assert (again.bound, again.recovered) == ([], 0)
    assert (await campaign(world, waiting)).version == 2

    # Later comments on the bound reel match through the webhook path as usual.
    later = world.admin.fan_comment("marco_rossi", reel, "guide!")["id"]
    assert (await arrive_by_webhook(world, later))["deliveries"] == 1
    await deliver_pending(world)
    for comment_id in (early, later):
        assert world.stats(comment_id)["send_requests"] == 1
    assert [log.campaign_id for log in await logs(world)] == [waiting, waiting]


async def test_two_waiting_campaigns_bind_oldest_armed_first(world: World) -> None:
    older = await armed(world, "Older", minutes_ago=2)
    newer = await armed(world, "Newer", minutes_ago=1)
    first_reel = publish_reel(world, "First")

    report = await bind_next_posts(world.resources)
    assert report.bound == [(older, first_reel)]
    assert report.waiting == [newer]
    assert report.refused == []  # waiting for the next post is not a conflict
    assert (await campaign(world, newer)).media_id is None

    second_reel = publish_reel(world, "Second")
    # Several binders at once (two workers, the cron and a request): one binding.
    reports = await asyncio.gather(*(bind_next_posts(world.resources) for _ in range(4)))
    assert [bound for r in reports for bound in r.bound] == [(newer, second_reel)]
    assert (await campaign(world, newer)).version == 2
    assert (await campaign(world, older)).media_id == first_reel
    assert len(await events(world, "next_post_bound")) == 2
    assert await events(world, "next_post_media_taken") == []


async def test_a_post_another_campaign_answers_is_refused_once_and_the_next_one_taken(
    world: World,
) -> None:
    waiting = await armed(world, "Next one", minutes_ago=1)
    reel = publish_reel(world, "Covered already")
    await add_campaign(
        world, "Specific", scope=CampaignScope.POST, media_id=reel, keywords=["guide"]
    )

    report = await bind_next_posts(world.resources)
    assert report.bound == []
    assert report.refused == [(waiting, reel)]
    [notice] = await events(world, "next_post_media_taken")
    assert '"Specific" already answers its comments' in notice.message
    assert notice.details is not None
    assert notice.details["media_id"] == reel
    # The same refusal a minute later is not a second notice.
    assert (await bind_next_posts(world.resources)).refused == [(waiting, reel)]
    assert len(await events(world, "next_post_media_taken")) == 1
    assert (await campaign(world, waiting)).version == 1

    next_reel = publish_reel(world, "Mine")
    report = await bind_next_posts(world.resources)
    assert report.bound == [(waiting, next_reel)]


async def test_only_active_armed_campaigns_bind_and_only_to_later_posts(world: World) -> None:
    # Armed just now: every post in the sandbox is older.
    fresh = await armed(world, "Fresh", minutes_ago=0)
    assert (await bind_next_posts(world.resources)).bound == []
    draft = await armed(world, "Draft", minutes_ago=5, status=CampaignStatus.DRAFT)
    paused = await armed(world, "Paused", minutes_ago=5, status=CampaignStatus.PAUSED)
    world.admin.advance_clock(2)  # Meta's times have whole seconds
    reel = publish_reel(world)
    assert (await bind_next_posts(world.resources)).bound == [(fresh, reel)]
    for other in (draft, paused):
        assert (await campaign(world, other)).media_id is None


async def test_a_binding_can_be_requested_right_after_arming(world: World) -> None:
    assert await request_binding(world.resources.queue, world.account_id)
    # A second request while the first waits in the queue coalesces with it.
    assert not await request_binding(world.resources.queue, world.account_id)
    assert f"bind-next-post:{world.account_id}" in await queued_keys(world.resources)


async def test_comments_recorded_as_misses_before_the_binding_get_their_dm_exactly_once(
    world: World,
) -> None:
    waiting = await armed(world, "Guide on my next reel", minutes_ago=1)
    reel = publish_reel(world)
    # The webhook is faster than the binding cron: before the binding these are misses.
    first = world.admin.fan_comment("jane.doe", reel, "GUIDE please")["id"]
    other = world.admin.fan_comment("marco_rossi", reel, "lovely colours")["id"]
    for comment_id in (first, other):
        assert (await arrive_by_webhook(world, comment_id))["deliveries"] == 0
    assert {(row.comment_id, row.miss_reason) for row in await ledger(world)} == {
        (first, MissReason.NO_KEYWORD),
        (other, MissReason.NO_KEYWORD),
    }

    # Several binders at once (the cron on two workers and the reconciler): one delivery.
    reports = await asyncio.gather(*(bind_next_posts(world.resources) for _ in range(3)))
    assert [bound for r in reports for bound in r.bound] == [(waiting, reel)]
    assert sum(r.recovered for r in reports) == 1
    assert (await reconcile_account(world.resources, world.account_id, force=True)).recovered == 0

    rows = {row.comment_id: row for row in await ledger(world)}
    assert (rows[first].outcome, rows[first].miss_reason, rows[first].campaign_id) == (
        CommentOutcome.MATCHED,
        None,
        waiting,
    )
    # A comment without the keyword stays a miss, now for its own reason.
    assert rows[other].outcome is CommentOutcome.MISSED
    [log] = await logs(world)
    assert (log.trigger_id, log.campaign_id) == (first, waiting)
    [sent] = await deliver_pending(world)
    assert sent.private == "SENT"
    assert world.stats(first)["send_requests"] == 1
    assert [m["text"] for m in world.inbox("jane.doe")] == ["Hi jane.doe! Here it is:"]
    # The webhook arriving again adds nothing.
    assert (await arrive_by_webhook(world, first))["deliveries"] == 0
    assert len(await logs(world)) == 1


async def test_with_no_other_campaign_the_miss_reads_unwatched_and_is_still_answered(
    world: World,
) -> None:
    await world.execute(
        "UPDATE campaigns SET status = 'paused' WHERE id = :id", id=world.campaign_id
    )
    waiting = await armed(world, "Guide on my next reel", minutes_ago=1)
    reel = publish_reel(world)
    early = world.admin.fan_comment("jane.doe", reel, "guide")["id"]
    assert (await arrive_by_webhook(world, early))["deliveries"] == 0
    [row] = await ledger(world)
    assert row.miss_reason is MissReason.NO_CAMPAIGN_FOR_POST

    report = await bind_next_posts(world.resources)
    assert (report.bound, report.recovered) == ([(waiting, reel)], 1)
    await deliver_pending(world)
    assert world.stats(early)["send_requests"] == 1
    assert (await bind_next_posts(world.resources)).recovered == 0
