"""Public replies never take a DM's place: the private reply goes first in a job, public
replies have an hourly budget of their own, and a campaign may skip its public reply while
the account's DMs wait for the hourly limit. Against the sandbox."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

from app.db.models import LegState
from app.delivery.send.budget_history import account_budget, public_reply_budget
from app.delivery.send.comment_flow import BACKLOG_SKIP_REASON
from app.delivery.send.dispatch import deliver
from app.resources import Resources
from tests.integration.delivery.conftest import World
from tests.support.webhooks import pending_keys


def _with_caps(resources: Resources, *, private: int, public: int) -> Resources:
    settings = dataclasses.replace(
        resources.settings, private_replies_per_hour=private, public_replies_per_hour=public
    )
    return dataclasses.replace(resources, settings=settings)


def _replies(world: World, comment_id: str) -> list[str]:
    return [r["text"] for r in world.admin.replies(comment_id=comment_id)]


async def _campaign(world: World, **fields: object) -> int:
    return await world.campaign(
        name="Thanks", public_reply_enabled=True, public_replies=["Thank you!"], **fields
    )


async def test_a_public_reply_uses_its_own_budget_and_goes_after_the_dm(world: World) -> None:
    resources = _with_caps(world.resources, private=5, public=5)
    campaign = await _campaign(world, public_reply_after_dm=False)
    row = await world.comment(campaign_id=campaign, public=True)
    report = await deliver(resources, worker_id="w", dm_log_id=row.id)
    assert (report.private, report.public) == ("SENT", "SENT")
    assert await account_budget(resources).used(world.account_id) == 1
    assert await public_reply_budget(resources).used(world.account_id) == 1
    (dm,) = world.inbox("jane.doe")
    (reply,) = world.admin.replies(comment_id=row.trigger_id)
    # The DM first: the public reply's call never stands before it.
    assert dm["time"] <= reply["time"], (dm, reply)


async def test_a_full_public_budget_delays_the_public_reply_and_never_the_dm(
    world: World,
) -> None:
    resources = _with_caps(world.resources, private=5, public=1)
    campaign = await _campaign(world, public_reply_after_dm=False)
    public = public_reply_budget(resources)
    await public.reserve(world.account_id)
    row = await world.comment(campaign_id=campaign, public=True)
    report = await deliver(resources, worker_id="w", dm_log_id=row.id)
    assert report.private == "SENT"
    assert report.public == "waiting for the public-reply budget"
    log = await world.log(row.id)
    assert (log.pr_state, log.pub_state) == (LegState.SENT, LegState.PENDING)
    assert log.pub_next_attempt_at is not None
    assert log.pub_next_attempt_at > datetime.now(UTC)
    assert _replies(world, row.trigger_id) == []
    assert len(world.inbox("jane.doe")) == 1
    # Its own job comes back for it when a slot has freed.
    assert [k for k in await pending_keys(resources) if k.startswith(f"deliver:{row.id}:")]
    assert await account_budget(resources).used(world.account_id) == 1


async def test_the_campaign_may_skip_its_public_reply_while_dms_wait(world: World) -> None:
    resources = _with_caps(world.resources, private=5, public=5)
    skipping = await _campaign(
        world, public_reply_after_dm=False, public_reply_skip_in_backlog=True
    )
    posting = await _campaign(world, public_reply_after_dm=False, keywords=["guide"])
    await world.execute("UPDATE instagram_accounts SET pr_backlog_since = now()")
    skipped = await world.comment("jane.doe", campaign_id=skipping, public=True)
    posted = await world.comment("marco_rossi", "GUIDE please", campaign_id=posting, public=True)

    report = await deliver(resources, worker_id="w", dm_log_id=skipped.id)
    assert (report.private, report.public) == ("waiting for budget", "SKIPPED_RATE_LIMIT")
    log = await world.log(skipped.id)
    assert (log.pr_state, log.pub_state) == (LegState.PENDING, LegState.SKIPPED_RATE_LIMIT)
    assert log.pub_error_message == BACKLOG_SKIP_REASON
    assert _replies(world, skipped.trigger_id) == []

    # Without the switch the reply is posted while the DM waits for the pacer.
    report = await deliver(resources, worker_id="w", dm_log_id=posted.id)
    assert (report.private, report.public) == ("waiting for budget", "SENT")
    assert _replies(world, posted.trigger_id) == ["Thank you!"]
    assert await account_budget(resources).used(world.account_id) == 0
