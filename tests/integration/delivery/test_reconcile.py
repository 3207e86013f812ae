"""The comment reconciler against the sandbox: comments webhooks missed are recovered and get
exactly one DM; old, answered and already-known comments are left alone; it is gentle on Meta.

The `world` fixture registers no webhook callback in the sandbox, so every comment made there
is a comment whose webhook never arrived; `arrive_by_webhook` plays the webhook when a test
wants both paths.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from app.db.models import AccountStatus, CampaignScope, LegState, SeenVia
from app.delivery.recovery.reconcile import reconcile_account
from tests.integration.delivery.conftest import LEMON_REEL, World
from tests.integration.delivery.polling import (
    account,
    activated_minutes_ago,
    add_campaign,
    arrive_by_webhook,
    deliver_pending,
    events,
    ledger,
    logs,
)
from tests.support.processes import start_worker
from tests.support.webhooks import queued_keys

SOURDOUGH = "17918195224117852"  # has yamada's STARTER comment, answered by the account
CINNAMON = "17918195224117855"  # has priya's RECIPE comment from 230 hours ago
OLGA_OLD_RECIPE = "17870913679156902"  # RECIPE on the lemon reel, 1.2 hours old
YAMADA_ANSWERED = "17870913679156903"
PRIYA_TOO_OLD = "17870913679156906"


async def test_a_comment_the_webhook_missed_is_recovered_and_gets_one_dm(world: World) -> None:
    await activated_minutes_ago(world, world.campaign_id, 1)
    made = world.admin.fan_comment("jane.doe", LEMON_REEL, "RECIPE please!")

    report = await reconcile_account(world.resources, world.account_id)

    assert (report.recovered, report.deferred, report.errors, report.stopped) == (1, 0, [], None)
    [row] = await ledger(world)
    assert row.comment_id == made["id"]
    assert row.first_seen_via is SeenVia.POLL
    assert row.campaign_id == world.campaign_id
    assert row.media_id == LEMON_REEL
    [log] = await logs(world)
    assert log.pr_state is LegState.PENDING
    assert log.recipient_username == "jane.doe"
    assert f"deliver:{log.id}" in await queued_keys(world.resources)

    [sent] = await deliver_pending(world)
    assert sent.private == "SENT", sent
    assert world.stats(made["id"])["private_replies_delivered"] == 1
    assert [m["text"] for m in world.inbox("jane.doe")] == ["Hi jane.doe! Here it is:"]

    # Not due again for RECONCILE_INTERVAL_S; and a forced sweep finds nothing new.
    assert (await reconcile_account(world.resources, world.account_id)).skipped
    again = await reconcile_account(world.resources, world.account_id, force=True)
    assert again.recovered == 0
    assert again.comments_seen > 0
    assert len(await logs(world)) == 1
    assert world.stats(made["id"])["send_requests"] == 1

    [recovered] = await events(world, "reconciler_recovered")
    assert recovered.message == "Recovered 1 comment the webhook missed"
    assert recovered.account_id == world.account_id
    assert recovered.workspace_id == world.workspace_id
    assert recovered.details == {"recovered": 1, "deferred": 0, "by_media": {LEMON_REEL: 1}}
    assert (await account(world)).last_reconciled_at is not None


async def test_a_comment_that_arrives_both_ways_is_processed_once(world: World) -> None:
    await activated_minutes_ago(world, world.campaign_id, 1)
    first = world.admin.fan_comment("jane.doe", LEMON_REEL, "RECIPE")["id"]
    second = world.admin.fan_comment("marco_rossi", LEMON_REEL, "recipe pls")["id"]
    both = world.admin.fan_comment("zoe.lefevre", LEMON_REEL, "Recipe!")["id"]

    # The webhook first, then the poll.
    assert (await arrive_by_webhook(world, first))["deliveries"] == 1
    swept = await reconcile_account(world.resources, world.account_id)
    assert swept.recovered == 2  # second and both: first is in the ledger already
    # The poll first, then the webhook: the webhook adds nothing.
    assert (await arrive_by_webhook(world, second))["deliveries"] == 0
    assert (await arrive_by_webhook(world, both))["deliveries"] == 0

    seen = {row.comment_id: row.first_seen_via for row in await ledger(world)}
    assert seen == {first: SeenVia.WEBHOOK, second: SeenVia.POLL, both: SeenVia.POLL}
    assert len(await logs(world)) == 3

    # At the same moment: the webhook's ingest and a sweep race for a new comment.
    racing = world.admin.fan_comment("olga.petrova", LEMON_REEL, "RECIPE пожалуйста")["id"]
    webhook, sweep = await asyncio.gather(
        arrive_by_webhook(world, racing),
        reconcile_account(world.resources, world.account_id, force=True),
    )
    assert int(webhook.get("deliveries", 0)) + sweep.recovered == 1
    assert len(await logs(world)) == 4

    reports = await deliver_pending(world)
    assert [r.private for r in reports] == ["SENT"] * 4
    for comment_id in (first, second, both, racing):
        stats = world.stats(comment_id)
        assert (stats["send_requests"], stats["private_replies_delivered"]) == (1, 1)
    await deliver_pending(world)
    assert all(row.pr_state is LegState.SENT for row in await logs(world))


async def test_old_answered_and_out_of_window_comments_are_not_touched(world: World) -> None:
    # Activated just now: olga's RECIPE from 1.2 hours ago predates it — no historical blast.
    await activated_minutes_ago(world, world.campaign_id, 0)
    # Active for two days: yamada's STARTER (20 h old) is inside its window, but the account
    # already answered it under the comment.
    starter = await add_campaign(
        world, "Starter", scope=CampaignScope.POST, media_id=SOURDOUGH, keywords=["starter"]
    )
    await activated_minutes_ago(world, starter, 48 * 60)
    # Active for twelve days: priya's RECIPE (230 h old) is past the 72-hour lookback.
    rolls = await add_campaign(world, "Rolls", scope=CampaignScope.POST, media_id=CINNAMON)
    await activated_minutes_ago(world, rolls, 12 * 24 * 60)
    # Comments from now on are certainly after the activation (Meta's times have whole seconds).
    world.admin.advance_clock(2)
    answered = world.admin.fan_comment("lucia.mendez", LEMON_REEL, "RECIPE")["id"]
    await world.resources.graph.reply_to_comment(world.token, answered, "Sent you a DM!")
    fresh = world.admin.fan_comment("priya.cooks", LEMON_REEL, "RECIPE please")["id"]

    report = await reconcile_account(world.resources, world.account_id)

    assert (report.recovered, report.errors, report.stopped) == (1, [], None)
    assert [row.comment_id for row in await ledger(world)] == [fresh]
    untouched = {OLGA_OLD_RECIPE, YAMADA_ANSWERED, PRIYA_TOO_OLD, answered}
    assert all(world.stats(c)["send_requests"] == 0 for c in untouched)
    [sent] = await deliver_pending(world)
    assert sent.private == "SENT"
    assert world.stats(fresh)["private_replies_delivered"] == 1


async def test_at_most_thirty_new_comments_per_media_per_sweep(world: World) -> None:
    await activated_minutes_ago(world, world.campaign_id, 1)
    made = []
    for n in range(60):
        fan = world.admin.add_fan(f"fan_{n:02d}")["username"]
        made.append(world.admin.fan_comment(fan, LEMON_REEL, "recipe")["id"])

    first = await reconcile_account(world.resources, world.account_id)
    # 62 comments on the reel: two pages back to the two that predate the campaign.
    assert (first.recovered, first.deferred) == (30, 30)
    assert first.pages >= 2
    assert {row.comment_id for row in await ledger(world)} == set(made[:30])  # oldest first
    [notice] = await events(world, "reconciler_recovered")
    assert notice.message == (
        "Recovered 30 comments the webhook missed; 30 more will follow in the next sweeps"
    )

    second = await reconcile_account(world.resources, world.account_id, force=True)
    assert (second.recovered, second.deferred) == (30, 0)
    assert {row.comment_id for row in await ledger(world)} == set(made)
    third = await reconcile_account(world.resources, world.account_id, force=True)
    assert (third.recovered, third.deferred) == (0, 0)
    assert len(await logs(world)) == 60
    assert {row.first_seen_via for row in await ledger(world)} == {SeenVia.POLL}


async def test_overlapping_sweeps_double_nothing(world: World) -> None:
    await activated_minutes_ago(world, world.campaign_id, 1)
    fans = [world.admin.add_fan(f"racer_{n}")["username"] for n in range(5)]
    made = [world.admin.fan_comment(fan, LEMON_REEL, "RECIPE")["id"] for fan in fans]

    # Due sweeps started together: one claims the account, the others leave it.
    reports = await asyncio.gather(
        *(reconcile_account(world.resources, world.account_id) for _ in range(3))
    )
    assert sorted(r.skipped is None for r in reports) == [False, False, True]
    assert sum(r.recovered for r in reports) == 5

    # Forced sweeps really overlap (as two workers past the claim would): still one row each.
    await world.execute("DELETE FROM dm_logs")
    await world.execute("DELETE FROM comments")
    forced = await asyncio.gather(
        *(reconcile_account(world.resources, world.account_id, force=True) for _ in range(3))
    )
    assert sum(r.recovered for r in forced) == 5
    assert sorted(row.comment_id for row in await ledger(world)) == sorted(made)
    assert len(await logs(world)) == 5

    await asyncio.gather(deliver_pending(world), deliver_pending(world))
    for comment_id in made:
        assert world.stats(comment_id)["send_requests"] == 1
    for fan in fans:
        assert len(world.inbox(fan)) == 1


async def test_a_media_that_cannot_be_read_is_noted_and_the_sweep_goes_on(world: World) -> None:
    await activated_minutes_ago(world, world.campaign_id, 1)
    on_lemon = world.admin.fan_comment("jane.doe", LEMON_REEL, "RECIPE")["id"]
    on_sourdough = world.admin.fan_comment("marco_rossi", SOURDOUGH, "recipe?")["id"]
    # The first comments read (the newest media, the lemon reel) is refused.
    world.admin.add_fault(
        "comments", "reject", code=100, message="Unsupported get request", times=1
    )

    report = await reconcile_account(world.resources, world.account_id)

    assert report.recovered == 1
    assert report.stopped is None
    assert len(report.errors) == 1
    assert "Unsupported get request" in report.errors[0]
    assert [row.comment_id for row in await ledger(world)] == [on_sourdough]
    [notice] = await events(world, "reconciler_read_failed")
    assert LEMON_REEL in notice.message

    later = await reconcile_account(world.resources, world.account_id, force=True)
    assert (later.recovered, later.errors) == (1, [])
    assert {row.comment_id for row in await ledger(world)} == {on_lemon, on_sourdough}
    assert len(await events(world, "reconciler_read_failed")) == 1


async def test_a_rate_limit_stops_the_sweep_at_once(world: World) -> None:
    await activated_minutes_ago(world, world.campaign_id, 1)
    world.admin.fan_comment("jane.doe", LEMON_REEL, "RECIPE")
    world.admin.fan_comment("marco_rossi", SOURDOUGH, "recipe?")
    world.admin.add_fault("comments", "reject", code=4, message="Application request limit")

    report = await reconcile_account(world.resources, world.account_id)

    assert report.stopped is not None
    assert "code 4" in report.stopped
    assert (report.media_read, report.pages, report.recovered) == (1, 0, 0)
    assert await ledger(world) == []
    [notice] = await events(world, "reconciler_read_failed")
    assert "slow down" in notice.message
    assert (await account(world)).last_reconciled_at is not None  # next try after the interval


async def test_a_refused_token_flags_the_account_and_stops(world: World) -> None:
    await activated_minutes_ago(world, world.campaign_id, 1)
    world.admin.fan_comment("jane.doe", LEMON_REEL, "RECIPE")
    world.admin.revoke_tokens(account="sunny.bakes")

    report = await reconcile_account(world.resources, world.account_id)

    assert report.stopped is not None
    assert "access token" in report.stopped
    assert report.recovered == 0
    assert (await account(world)).status is AccountStatus.NEEDS_REAUTH
    assert len(await events(world, "account_needs_reauth")) == 1
    # A flagged account is not swept until it is reconnected.
    assert (await reconcile_account(world.resources, world.account_id, force=True)).skipped


async def test_two_worker_processes_recover_a_missed_comment_once(
    world: World, delivery_env: dict[str, str], artifacts_dir: Path
) -> None:
    await activated_minutes_ago(world, world.campaign_id, 1)
    made = world.admin.fan_comment("jane.doe", LEMON_REEL, "RECIPE please")["id"]
    env = {**delivery_env, "RECONCILE_INTERVAL_S": "10"}
    workers = [start_worker(env, artifacts_dir, f"reconcile-worker-{n}") for n in range(2)]
    try:
        deadline = time.monotonic() + 60
        while world.stats(made)["private_replies_delivered"] < 1:
            assert time.monotonic() < deadline, "the missed comment was not delivered in 60 s"
            await asyncio.sleep(0.2)
        swept_at = (await account(world)).last_reconciled_at
        assert swept_at is not None
        # Let both workers' crons sweep the account again at least once.
        while (await account(world)).last_reconciled_at == swept_at:
            assert time.monotonic() < deadline + 40, "no second sweep within the interval"
            await asyncio.sleep(0.2)
    finally:
        for worker in workers:
            worker.stop()
    assert world.stats(made)["send_requests"] == 1
    assert len(world.inbox("jane.doe")) == 1
    [row] = await ledger(world)
    assert row.first_seen_via is SeenVia.POLL
    assert len(await events(world, "reconciler_recovered")) == 1
