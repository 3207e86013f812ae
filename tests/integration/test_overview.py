"""The overview page: today's deliveries per account, duplicate sends blocked (and what is
counted), the queue, recent operational events, and nothing from another workspace.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy import update

from app.asgi import create_app
from app.db.models import (
    AccountStatus,
    EventLevel,
    InstagramAccount,
    LegState,
    WebhookEvent,
    WebhookStatus,
)
from app.delivery_log.words import STATE_WORDS
from app.operations.events import record_event
from app.queue import JobName, enqueue
from app.resources import Resources
from app.settings import Settings
from app.workspaces.time_zone import start_of_day
from tests.support.dashboard import add_account, identity_of
from tests.support.log_data import Creator, add_log, other_workspace, signed_in_creator

HTML = {"accept": "text/html"}


@pytest.fixture
async def owner(
    settings: Settings, resources: Resources, test_env: dict[str, str]
) -> AsyncIterator[Creator]:
    async with signed_in_creator(settings, resources) as creator:
        yield creator


def _cells(html: str, username: str) -> dict[str, int]:
    row = re.search(rf'<tr data-account="{re.escape(username)}">(.*?)</tr>', html, re.DOTALL)
    assert row, username
    return {
        name: int(value) for name, value in re.findall(r'class="n-(\w+)">(\d+)</td>', row.group(1))
    }


def _number(html: str, element_id: str) -> int:
    match = re.search(rf'id="{element_id}"[^>]*>\s*(?:<span class="stat-number">)?(\d+)', html)
    assert match, element_id
    return int(match.group(1))


async def test_today_per_account_and_blocked_duplicates(
    settings: Settings, resources: Resources, owner: Creator
) -> None:
    second = await add_account(
        resources, owner.workspace_id, ig_user_id="17841400000000999", username="sunny.two"
    )
    yesterday = start_of_day(UTC) - timedelta(hours=2)
    states = [LegState.SENT] * 3 + [LegState.FAILED, LegState.UNCONFIRMED, LegState.PENDING]
    for state in states:
        await add_log(resources, owner, state=state)
    await add_log(resources, owner, state=LegState.SKIPPED_DEDUP)
    await add_log(resources, owner, state=LegState.SKIPPED_WINDOW_EXPIRED, account_id=second)
    await add_log(
        resources,
        owner,
        state=LegState.SENT,
        account_id=second,
        pr_evidence={"confirmed_by": "meta_already_used", "confirmed_at": "x"},
    )
    await add_log(
        resources,
        owner,
        state=LegState.SENT,
        account_id=second,
        pr_evidence={"confirmed_by": "conversations_api"},
    )
    await add_log(resources, owner, state=LegState.FAILED, created_at=yesterday)  # not today
    other = await other_workspace(settings, resources)
    await add_log(resources, other, state=LegState.SKIPPED_DEDUP)
    await add_log(resources, other, state=LegState.FAILED)
    async with resources.sessionmaker() as session, session.begin():
        for when, duplicates in ((datetime.now(UTC), 4), (datetime.now(UTC), 2), (yesterday, 9)):
            session.add(
                WebhookEvent(
                    body=b"{}",
                    status=WebhookStatus.PROCESSED,
                    received_at=when,
                    details={"comments": {"new": 1, "duplicate": duplicates}},
                )
            )

    page = await owner.client.get("/", headers=HTML)
    assert page.status_code == 200
    html = page.text
    assert _cells(html, "sunny.bakes") == {
        "sent": 3,
        "failed": 1,
        "unconfirmed": 1,
        "skipped": 1,
        "waiting": 1,
    }
    assert _cells(html, "sunny.two") == {
        "sent": 2,
        "failed": 0,
        "unconfirmed": 0,
        "skipped": 1,
        "waiting": 0,
    }
    assert "north.trails" not in html
    assert _number(html, "stat-sent") == 5
    assert _number(html, "stat-failed") == 1
    assert _number(html, "stat-unconfirmed") == 1
    assert _number(html, "stat-skipped") == 2
    assert _number(html, "dup-same-person") == 1
    assert _number(html, "dup-proven") == 2
    assert "1 by Instagram’s “already replied” answer" in html
    assert _number(html, "dup-total") == 3
    # Webhook redeliveries are counted per POST, across workspaces: not this workspace's number.
    assert 'id="dup-webhooks"' not in html
    assert 'href="/log?state=FAILED&amp;from=' in html


async def test_queue_and_recent_events(
    settings: Settings, resources: Resources, owner: Creator
) -> None:
    other = await other_workspace(settings, resources)
    events = [
        (owner.workspace_id, owner.account_id, EventLevel.WARNING, "account_paused",
         "@sunny.bakes is paused for 6 hours after a policy block"),
        (owner.workspace_id, None, EventLevel.INFO, "reconciler_recovered",
         "Recovered 3 comments the webhook missed"),
        (None, None, EventLevel.ERROR, "webhook_signature_invalid",
         "refused a webhook POST: signature mismatch"),
        (other.workspace_id, other.account_id, EventLevel.ERROR, "account_needs_reauth",
         "@north.trails needs to be reconnected"),
    ]  # fmt: skip
    async with resources.sessionmaker() as session, session.begin():
        for workspace_id, account_id, level, kind, message in events:
            await record_event(
                session,
                workspace_id=workspace_id,
                account_id=account_id,
                source="worker",
                level=level,
                kind=kind,
                message=message,
            )
    for n in range(3):
        await enqueue(resources.queue, JobName.PURGE_EXPIRED, key=f"overview-test-{n}")

    page = await owner.client.get("/", headers=HTML)
    html = page.text
    events = re.findall(r'<li class="event event-(\w+)" data-kind="(\w+)">', html)
    # Only this workspace's: not another tenant's, and not the server-wide webhook refusal
    # (the operator's, in the log), whose text could come from anyone's payload.
    assert events == [
        ("info", "reconciler_recovered"),
        ("warning", "account_paused"),
    ]
    assert "north.trails needs to be reconnected" not in html
    assert "refused a webhook POST" not in html
    assert _number(html, "queue-depth") == 3
    assert _number(html, "queue-active") == 0

    partial = await owner.client.get("/", headers={**HTML, "HX-Request": "true"})
    assert partial.headers["vary"] == "HX-Request"
    assert partial.text.lstrip().startswith('<div id="overview"')
    assert "<html" not in partial.text


async def test_an_empty_workspace_is_told_where_to_start(
    settings: Settings, resources: Resources, test_env: dict[str, str]
) -> None:
    from tests.support.dashboard import sign_up

    async with AsyncTestClient(create_app(settings)) as client:
        await sign_up(client, "new@example.com")
        page = await client.get("/", headers=HTML)
    assert "Start here" in page.text
    assert _number(page.text, "stat-sent") == 0
    assert _number(page.text, "dup-total") == 0


async def test_a_connected_account_without_campaigns_is_told_the_next_step(
    settings: Settings, resources: Resources, test_env: dict[str, str]
) -> None:
    from tests.support.dashboard import sign_up

    async with AsyncTestClient(create_app(settings)) as client:
        await sign_up(client, "next@example.com")
        _, workspace_id = await identity_of(resources, "next@example.com")
        await add_account(resources, workspace_id, ig_user_id="17841400000000777", username="sunny")
        page = await client.get("/", headers=HTML)
    text = " ".join(re.sub(r"<[^>]+>", "", page.text).split())
    assert "Next: your first campaign" in text
    assert "Create a campaign to answer comments such as “RECIPE” with a private reply." in text


async def test_the_overview_names_each_state_as_the_log_does(
    settings: Settings, resources: Resources, owner: Creator
) -> None:
    """A creator who clicks "1 not sent" lands on the log's "Not sent" rows: the same words."""
    page = await owner.client.get("/", headers=HTML)
    html = page.text
    for stat, state in (
        ("stat-failed", LegState.FAILED),
        ("stat-unconfirmed", LegState.UNCONFIRMED),
    ):
        label = re.search(
            rf'id="{stat}".*?<span class="stat-label">([^<]+)</span>', html, re.DOTALL
        )
        assert label, stat
        assert label.group(1).startswith(STATE_WORDS[state].lower()), label.group(1)
    header = re.search(r'<table class="per-account" id="per-account">.*?</thead>', html, re.DOTALL)
    assert header
    columns = re.findall(r"<th>([^<]+)</th>", header.group(0))
    assert columns == [
        "Account",
        "Status",
        STATE_WORDS[LegState.SENT],
        STATE_WORDS[LegState.FAILED],
        STATE_WORDS[LegState.UNCONFIRMED],
        "Skipped",
        "Waiting",
    ]
    # The log's words for a state, never its code.
    assert "SKIPPED_DEDUP" not in html
    assert STATE_WORDS[LegState.SKIPPED_DEDUP] in html


async def test_an_account_to_reconnect_says_so_in_words_with_the_reason_beside(
    resources: Resources, owner: Creator
) -> None:
    reason = "Instagram refused the access token and it could not be refreshed"
    async with resources.sessionmaker() as session, session.begin():
        await session.execute(
            update(InstagramAccount)
            .where(InstagramAccount.id == owner.account_id)
            .values(status=AccountStatus.NEEDS_REAUTH, status_reason=reason)
        )
    overview = (await owner.client.get("/", headers=HTML)).text
    warning = re.search(
        r'<p class="flash flash-warning" data-attention="sunny.bakes">(.*?)</p>',
        overview,
        re.DOTALL,
    )
    assert warning
    headline = re.sub(r'<span class="muted small">.*?</span>', "", warning.group(1))
    assert "@sunny.bakes needs attention: reconnect needed." in headline
    assert "reauth" not in headline
    assert reason not in headline
    assert reason in warning.group(1)  # the details, after the sentence
    row = re.search(r'<tr data-account="sunny.bakes">.*?</tr>', overview, re.DOTALL)
    assert row
    assert "Reconnect needed" in row.group(0)
    accounts = (await owner.client.get("/accounts", headers=HTML)).text
    why = re.search(
        r'<p class="flash flash-error small" data-field="reconnect-why">(.*?)</p>',
        accounts,
        re.DOTALL,
    )
    assert why
    assert why.group(1).startswith(
        "Instagram no longer accepts this account's sign-in: reconnect it to keep answering"
        f' comments. <span class="muted">Details: {reason}</span>'
    )
    assert (
        '<span class="status status-needs_reauth" data-field="status">Reconnect needed</span>'
        in accounts
    )


async def test_repeats_absorbed_per_account_and_kind_over_the_last_day(
    settings: Settings, resources: Resources, owner: Creator
) -> None:
    from sqlalchemy import text

    from app.db.models import IdempotencyHitKind
    from app.db.raw import pipelined_transaction
    from app.operations.idempotency import Finished, KeyRequest, Replay, run_once
    from app.operations.idempotency_hits import count_hit, count_webhook_duplicates

    page = await owner.client.get("/", headers=HTML)
    assert "No repeats in the last 24 hours" in page.text

    # A button submitted twice with its one-time key: the second is a repeat.
    async def action(_: Any) -> Finished:
        return Finished({"status": 303, "location": "/"})

    request = KeyRequest("campaign.pause", "key-1", "f", workspace_id=owner.workspace_id)
    await run_once(resources.sessionmaker, request, action)
    assert isinstance(await run_once(resources.sessionmaker, request, action), Replay)
    # Meta redelivering three comments, and a second job for a DM already sent.
    async with pipelined_transaction(resources.engine) as db:
        await count_webhook_duplicates(db, {(owner.workspace_id, owner.account_id): 3}, "test")
    async with resources.engine.connect() as conn:
        await count_hit(
            conn,
            workspace_id=owner.workspace_id,
            account_id=owner.account_id,
            kind=IdempotencyHitKind.SEND_BLOCKED,
            scope="test",
        )
        await conn.commit()
        # Older than a day: not shown.
        await conn.execute(
            text(
                "INSERT INTO idempotency_hits (workspace_id, account_id, kind, hour, hits) "
                "VALUES (:w, :a, 'webhook_duplicate', now() - interval '25 hours', 40)"
            ),
            {"w": owner.workspace_id, "a": owner.account_id},
        )
        await conn.commit()
    north = await other_workspace(settings, resources)
    async with pipelined_transaction(resources.engine) as db:
        await count_webhook_duplicates(db, {(north.workspace_id, north.account_id): 9}, "test")

    html = (await owner.client.get("/", headers=HTML)).text
    assert _repeats(html, "sunny.bakes") == {
        "webhook-duplicates": 3,
        "sends-blocked": 1,
        "button-repeats": 0,
    }
    assert _repeats(html, "dashboard") == {
        "webhook-duplicates": 0,
        "sends-blocked": 0,
        "button-repeats": 1,
    }
    assert "north.trails" not in html


def _repeats(html: str, who: str) -> dict[str, int]:
    row = re.search(rf'<tr data-repeats="{re.escape(who)}">(.*?)</tr>', html, re.DOTALL)
    assert row, who
    return {
        name: int(value)
        for name, value in re.findall(r'class="n-([\w-]+)">(\d+)</td>', row.group(1))
    }
