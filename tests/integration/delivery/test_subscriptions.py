"""The webhook subscription self-check against the sandbox."""

from __future__ import annotations

from typing import Any

from app.accounts.connect import WEBHOOK_FIELDS
from app.accounts.subscriptions import check_subscriptions
from app.db.models import AccountStatus
from tests.integration.delivery.conftest import SUNNY, World
from tests.integration.delivery.polling import account, events


def sandbox_fields(world: World) -> list[str]:
    accounts: list[dict[str, Any]] = world.admin.world()["accounts"]
    [sunny] = [a for a in accounts if a["user_id"] == SUNNY]
    fields: list[str] = sunny["subscribed_fields"]
    return fields


async def test_an_unsubscribed_account_is_subscribed_and_kept_fresh(world: World) -> None:
    assert sandbox_fields(world) == []
    assert (await account(world)).webhook_subscribed_at is None

    report = await check_subscriptions(world.resources)

    assert (report.subscribed, report.failed) == ([world.account_id], {})
    assert sorted(sandbox_fields(world)) == sorted(WEBHOOK_FIELDS)
    row = await account(world)
    assert row.webhook_subscribed_at is not None
    assert row.webhook_fields == list(WEBHOOK_FIELDS)

    # Fresh: left alone. A day old, or missing a field: subscribed again.
    assert (await check_subscriptions(world.resources)).subscribed == []
    await world.execute(
        "UPDATE instagram_accounts SET webhook_subscribed_at = now() - interval '25 hours'"
    )
    assert (await check_subscriptions(world.resources)).subscribed == [world.account_id]
    await world.execute("UPDATE instagram_accounts SET webhook_fields = '{comments}'")
    assert (await check_subscriptions(world.resources)).subscribed == [world.account_id]
    assert (await account(world)).webhook_fields == list(WEBHOOK_FIELDS)
    # On request (the dashboard's button), even when fresh.
    forced = await check_subscriptions(world.resources, account_id=world.account_id, force=True)
    assert forced.subscribed == [world.account_id]


async def test_a_failed_subscription_is_an_alert_once_a_day(world: World) -> None:
    world.admin.add_fault("subscribed_apps", "reject", code=200, message="Permissions error")

    first = await check_subscriptions(world.resources)
    assert list(first.failed) == [world.account_id]
    assert "Permissions error" in first.failed[world.account_id]
    assert (await account(world)).webhook_subscribed_at is None
    [alert] = await events(world, "webhook_subscription_failed")
    assert alert.account_id == world.account_id
    assert "@sunny.bakes" in alert.message

    # Still failing an hour later: retried, but not a second alert.
    assert list((await check_subscriptions(world.resources)).failed) == [world.account_id]
    assert len(await events(world, "webhook_subscription_failed")) == 1

    world.admin.clear_faults()
    assert (await check_subscriptions(world.resources)).subscribed == [world.account_id]


async def test_only_accounts_that_can_work_are_checked(world: World) -> None:
    for status in (AccountStatus.NEEDS_REAUTH, AccountStatus.DISCONNECTED):
        await world.execute("UPDATE instagram_accounts SET status = :s", s=status.value)
        report = await check_subscriptions(world.resources)
        assert (report.subscribed, report.failed) == ([], {})
    # Paused (a policy block, or by the creator): comments must still arrive.
    await world.execute("UPDATE instagram_accounts SET status = 'paused'")
    assert (await check_subscriptions(world.resources)).subscribed == [world.account_id]
    assert sorted(sandbox_fields(world)) == sorted(WEBHOOK_FIELDS)
