"""The worker side of ingestion: stored events → ledger rows → PENDING deliveries → jobs."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import func, select, text, update

from app.db.models import (
    AccountStatus,
    CampaignScope,
    Comment,
    CommentOutcome,
    DmLog,
    LegState,
    MatchMode,
    MessagingEvent,
    MissReason,
    OperationalEvent,
    SeenVia,
    TriggerKind,
    WebhookEvent,
    WebhookStatus,
)
from app.db.models import MessagingEventKind as Kind
from app.db.models import MessagingMissReason as Miss
from app.delivery.intake.comments import enqueue_deliveries, ingest_comments
from app.delivery.intake.outbox import TRANSIENT_ERRORS, redrive_failed, run_ingest
from app.instagram.webhook_payload import comment_from_graph
from app.resources import Resources
from tests.support.webhooks import (
    ACCOUNT,
    OTHER_ACCOUNT,
    OTHER_REEL,
    REEL,
    comment_value,
    comments_body,
    messaging_body,
    meta_bytes,
    queued_keys,
    seed_account,
    seed_campaign,
    store_event,
)

FAN = "1254459154682919"


async def store(resources: Resources, *bodies: bytes) -> list[int]:
    async with resources.sessionmaker() as session, session.begin():
        return [await store_event(session, body) for body in bodies]


async def rows(resources: Resources, model: Any, *where: Any) -> list[Any]:
    async with resources.sessionmaker() as session:
        return list((await session.execute(select(model).where(*where))).scalars())


async def count(resources: Resources, model: Any) -> int:
    async with resources.sessionmaker() as session:
        return int((await session.execute(select(func.count()).select_from(model))).scalar_one())


async def test_a_matching_comment_becomes_a_ledger_row_and_a_pending_delivery(
    resources: Resources,
) -> None:
    async with resources.sessionmaker() as session, session.begin():
        account = await seed_account(session)
        campaign = await seed_campaign(session, account, public_replies=["Check your DMs"])
        await seed_campaign(
            session, account, name="Any post", scope=CampaignScope.ANY_POST, priority=9
        )
    (event_id,) = await store(resources, comments_body(comment_value("17870000000000001")))

    summary = await run_ingest(resources, [event_id])

    assert summary["processed"] == 1
    assert summary["deliveries"] == 1
    (comment,) = await rows(resources, Comment)
    assert comment.outcome is CommentOutcome.MATCHED
    assert comment.campaign_id == campaign.id
    assert comment.matched_keyword == "guide"
    assert comment.first_seen_via is SeenVia.WEBHOOK
    assert comment.webhook_event_id == event_id
    assert comment.decision["considered"][1] == {
        "campaign_id": campaign.id + 1,
        "name": "Any post",
        "verdict": "lost",
        "keyword": "guide",
        "lost_to": "Guide",
    }
    (log,) = await rows(resources, DmLog)
    assert (log.trigger_kind, log.trigger_id, log.comment_row_id) == (
        TriggerKind.COMMENT,
        "17870000000000001",
        comment.id,
    )
    assert (log.workspace_id, log.account_id, log.campaign_id, log.campaign_version) == (
        account.workspace_id,
        account.id,
        campaign.id,
        1,
    )
    assert (log.recipient_id, log.recipient_username, log.media_id) == (
        "1254459154682919",
        "jane_doe",
        REEL,
    )
    assert log.trigger_text == "GUIDE please"
    assert log.pr_state is LegState.PENDING
    assert log.pub_state is LegState.PENDING
    assert log.deadline_at == comment.commented_at + timedelta(days=7)
    assert abs(comment.commented_at - datetime.now(UTC)) < timedelta(minutes=1)
    (event,) = await rows(resources, WebhookEvent)
    assert event.status is WebhookStatus.PROCESSED
    assert event.item_count == 1
    assert event.details == {"comments": {"new": 1, "matched": 1}}
    assert await queued_keys(resources) == [f"deliver:{log.id}"]


async def test_the_same_comment_three_times_by_webhook_and_once_by_poll_is_one_of_each(
    resources: Resources,
) -> None:
    async with resources.sessionmaker() as session, session.begin():
        account = await seed_account(session)
        await seed_campaign(session, account)
    value = comment_value("17870000000000002")
    first, second, third = await store(
        resources, comments_body(value), comments_body(value, flat=True), comments_body(value)
    )
    await run_ingest(resources, [first])
    # A redelivery ingested together with another copy of itself, in one batch.
    summary = await run_ingest(resources, [second, third])
    assert summary == {"processed": 2, "rejected": 0, "deliveries": 0, "items": 2, "duplicate": 2}
    # Counted for the overview, per account: two comments Meta sent again, absorbed.
    async with resources.engine.connect() as conn:
        hits = (
            await conn.execute(text("SELECT account_id, kind, hits FROM idempotency_hits"))
        ).all()
    assert [tuple(hit) for hit in hits] == [(account.id, "webhook_duplicate", 2)]

    polled = comment_from_graph(
        ACCOUNT,
        REEL,
        {
            "id": "17870000000000002",
            "text": "GUIDE please",
            "timestamp": "2026-01-01T10:00:00+0000",
            "from": {"id": "1254459154682919", "username": "jane_doe"},
        },
        fallback_time=datetime.now(UTC),
    )
    async with resources.sessionmaker() as session, session.begin():
        polled_result = await ingest_comments(session, [polled], via=SeenVia.POLL)
    assert polled_result.deliveries == []
    assert polled_result.totals() == {"duplicate": 1}
    await enqueue_deliveries(resources.queue, polled_result.deliveries)

    (comment,) = await rows(resources, Comment)
    assert comment.first_seen_via is SeenVia.WEBHOOK
    assert comment.webhook_event_id == first
    (log,) = await rows(resources, DmLog)
    assert await queued_keys(resources) == [f"deliver:{log.id}"]
    # Enqueueing the same delivery again while it waits adds no second job.
    assert await enqueue_deliveries(resources.queue, [log.id]) == 0
    assert await queued_keys(resources) == [f"deliver:{log.id}"]


async def test_a_polled_comment_first_seen_by_the_reconciler(resources: Resources) -> None:
    async with resources.sessionmaker() as session, session.begin():
        account = await seed_account(session)
        await seed_campaign(session, account)
    at = datetime.now(UTC) - timedelta(hours=2)
    polled = comment_from_graph(
        ACCOUNT,
        REEL,
        {
            "id": "17870000000000003",
            "text": "guide!",
            "timestamp": at.strftime("%Y-%m-%dT%H:%M:%S+0000"),
            "from": {"id": "99", "username": "bob"},
        },
        fallback_time=datetime.now(UTC),
    )
    async with resources.sessionmaker() as session, session.begin():
        result = await ingest_comments(session, [polled], via=SeenVia.POLL)
    assert len(result.deliveries) == 1
    assert await enqueue_deliveries(resources.queue, result.deliveries) == 1
    (comment,) = await rows(resources, Comment)
    assert comment.first_seen_via is SeenVia.POLL
    assert comment.webhook_event_id is None
    (log,) = await rows(resources, DmLog)
    assert log.deadline_at == at.replace(microsecond=0) + timedelta(days=7)


async def test_misses_are_recorded_with_their_reason_and_create_no_work(
    resources: Resources,
) -> None:
    async with resources.sessionmaker() as session, session.begin():
        account = await seed_account(session)
        await seed_campaign(session, account, excluded=["spam"])
        await seed_account(session, "17841400000000555", status=AccountStatus.DISCONNECTED)
    body = comments_body(
        comment_value("c-own", commenter_id=ACCOUNT, username="sunny.bakes"),
        comment_value("c-reply", parent_id="17865799348089039"),
        comment_value("c-none", "nice reel"),
        comment_value("c-excluded", "guide spam"),
        comment_value("c-empty", "   "),
        comment_value("c-other-post", media_id=OTHER_REEL),
    )
    gone = comments_body(comment_value("c-gone"), account="17841400000000555")
    unknown = comments_body(comment_value("c-unknown"), account=OTHER_ACCOUNT)
    ids = await store(resources, body, gone, unknown)

    summary = await run_ingest(resources, ids)

    assert summary["deliveries"] == 0
    reasons = {c.comment_id: c.miss_reason for c in await rows(resources, Comment)}
    assert reasons == {
        "c-own": MissReason.OWN_COMMENT,
        "c-reply": MissReason.REPLY_TO_COMMENT,
        "c-none": MissReason.NO_KEYWORD,
        "c-excluded": MissReason.EXCLUDED_KEYWORD,
        "c-empty": MissReason.EMPTY_TEXT,
        "c-other-post": MissReason.NO_CAMPAIGN_FOR_POST,
        "c-gone": MissReason.ACCOUNT_INACTIVE,
    }
    assert await count(resources, DmLog) == 0
    events = {e.id: e for e in await rows(resources, WebhookEvent)}
    assert events[ids[2]].status is WebhookStatus.PROCESSED
    assert events[ids[2]].details == {"comments": {"unknown_account": 1}}
    (alert,) = await rows(
        resources, OperationalEvent, OperationalEvent.kind == "webhook_unknown_account"
    )
    assert OTHER_ACCOUNT in alert.message
    assert await queued_keys(resources) == []


async def test_only_the_accounts_own_comment_is_own_whatever_scoped_id_it_carries(
    resources: Resources,
) -> None:
    async with resources.sessionmaker() as session, session.begin():
        account = await seed_account(session)
        await seed_campaign(session, account)
    fan = comment_value("c-fan", "GUIDE please")
    fan["from"]["self_ig_scoped_id"] = "5512345678901234"
    own = comment_value("c-own", "GUIDE", commenter_id=ACCOUNT, username="sunny.bakes")
    own["from"]["self_ig_scoped_id"] = "9912345678901234"
    ids = await store(resources, comments_body(fan, own))

    summary = await run_ingest(resources, ids)

    assert summary["deliveries"] == 1
    reasons = {c.comment_id: c.miss_reason for c in await rows(resources, Comment)}
    assert reasons == {"c-fan": None, "c-own": MissReason.OWN_COMMENT}
    (log,) = await rows(resources, DmLog)
    assert (log.trigger_id, log.recipient_id) == ("c-fan", FAN)


async def test_paused_and_reauth_accounts_keep_their_work(resources: Resources) -> None:
    async with resources.sessionmaker() as session, session.begin():
        for ig_id, status in (
            ("17841400000000601", AccountStatus.PAUSED),
            ("17841400000000602", AccountStatus.NEEDS_REAUTH),
        ):
            account = await seed_account(session, ig_id, status=status)
            await seed_campaign(session, account, scope=CampaignScope.ANY_POST)
    ids = await store(
        resources,
        comments_body(comment_value("p-1"), account="17841400000000601"),
        comments_body(comment_value("p-2"), account="17841400000000602"),
    )
    assert (await run_ingest(resources, ids))["deliveries"] == 2


async def test_a_thousand_comments_in_one_post(resources: Resources) -> None:
    async with resources.sessionmaker() as session, session.begin():
        account = await seed_account(session)
        other = await seed_account(session, OTHER_ACCOUNT)
        await seed_campaign(session, account)
        await seed_campaign(session, other, scope=CampaignScope.ANY_POST, mode=MatchMode.CONTAINS)
    entries = [
        {
            "id": ACCOUNT if n % 2 else OTHER_ACCOUNT,
            "time": int(datetime.now(UTC).timestamp()),
            "changes": [
                {
                    "field": "comments",
                    "value": comment_value(
                        f"18{n:015d}", "Guide" if n % 3 else "hello", commenter_id=f"7{n:010d}"
                    ),
                }
            ],
        }
        for n in range(1000)
    ]
    (event_id,) = await store(resources, meta_bytes({"object": "instagram", "entry": entries}))

    summary = await run_ingest(resources, [event_id])

    matched = sum(1 for n in range(1000) if n % 3)
    assert summary["items"] == 1000
    assert summary["new"] == 1000
    assert summary["deliveries"] == matched
    assert await count(resources, Comment) == 1000
    assert await count(resources, DmLog) == matched
    # Each account has far more new comments than one batch of its budget may send at once:
    # they go to its pacer, with no job each.
    assert sorted(await queued_keys(resources)) == sorted(f"pace:{a.id}" for a in (account, other))
    # Ingesting it again changes nothing.
    async with resources.sessionmaker() as session, session.begin():
        await session.execute(
            text("UPDATE webhook_events SET status = 'received' WHERE id = :id"), {"id": event_id}
        )
    again = await run_ingest(resources, [event_id])
    assert again["deliveries"] == 0
    assert again["duplicate"] == 1000
    assert await count(resources, DmLog) == matched


async def test_ingesting_a_processed_event_again_is_a_no_op(resources: Resources) -> None:
    async with resources.sessionmaker() as session, session.begin():
        await seed_campaign(session, await seed_account(session))
    (event_id,) = await store(resources, comments_body(comment_value("c-1")))
    await run_ingest(resources, [event_id])
    (before,) = await rows(resources, WebhookEvent)
    assert await run_ingest(resources, [event_id]) == {
        "processed": 0,
        "rejected": 0,
        "deliveries": 0,
    }
    (after,) = await rows(resources, WebhookEvent)
    assert (after.status, after.processed_at, after.details) == (
        before.status,
        before.processed_at,
        before.details,
    )


async def test_two_jobs_racing_for_the_same_events_write_everything_once(
    resources: Resources,
) -> None:
    async with resources.sessionmaker() as session, session.begin():
        await seed_campaign(session, await seed_account(session))
    bodies = [comments_body(comment_value(f"r-{n}"), comment_value("r-shared")) for n in range(20)]
    ids = await store(resources, *bodies)

    results = await asyncio.gather(*(run_ingest(resources, ids) for _ in range(4)))

    assert sum(r.get("processed", 0) for r in results) == 20
    assert await count(resources, Comment) == 21
    assert await count(resources, DmLog) == 21
    # Each row has its job, or (more than a batch arriving) its account's pacer has them all.
    keys = await queued_keys(resources)
    jobs = [k for k in keys if k.startswith("deliver:")]
    assert len(jobs) == 21 or [k for k in keys if k.startswith("pace:")], keys


async def test_unknown_objects_and_malformed_items_are_recorded_not_half_written(
    resources: Resources,
) -> None:
    async with resources.sessionmaker() as session, session.begin():
        await seed_campaign(session, await seed_account(session))
    page = meta_bytes({"object": "page", "entry": [{"id": "1", "changes": []}]})
    not_a_list = meta_bytes({"object": "instagram", "entry": {"id": ACCOUNT}})
    good = comment_value("m-good")
    bad_type = comment_value("m-bad")
    bad_type["text"] = {"nested": "GUIDE"}
    too_long = comment_value("9" * 40)
    mixed = meta_bytes(
        {
            "object": "instagram",
            "entry": [
                {
                    "id": ACCOUNT,
                    "changes": [
                        {"field": "comments", "value": bad_type},
                        {"field": "comments", "value": good},
                        {"field": "comments", "value": too_long},
                        {"field": "mentions", "value": {"comment_id": "1"}},
                    ],
                }
            ],
        }
    )
    ids = await store(resources, page, not_a_list, mixed)

    summary = await run_ingest(resources, ids)

    assert (summary["processed"], summary["rejected"], summary["deliveries"]) == (1, 2, 1)
    events = {e.id: e for e in await rows(resources, WebhookEvent)}
    assert events[ids[0]].status is WebhookStatus.REJECTED
    assert events[ids[0]].reject_reason == "unknown object 'page'; expected 'instagram'"
    assert events[ids[1]].status is WebhookStatus.REJECTED
    assert "'entry' is an object" in (events[ids[1]].reject_reason or "")
    mixed_event = events[ids[2]]
    assert mixed_event.status is WebhookStatus.PROCESSED
    assert mixed_event.item_count == 4
    assert mixed_event.details is not None
    assert mixed_event.details["ignored"] == {"mentions": 1}
    assert mixed_event.details["problem_count"] == 2
    assert [p["path"] for p in mixed_event.details["problems"]] == [
        "entry[0].changes[0].value.text",
        "entry[0].changes[2].value.id",
    ]
    assert [c.comment_id for c in await rows(resources, Comment)] == ["m-good"]
    kinds = {e.kind for e in await rows(resources, OperationalEvent)}
    assert {"webhook_items_malformed", "webhook_event_rejected"} <= kinds


async def test_a_poison_event_is_set_aside_and_the_rest_of_its_batch_goes_through(
    resources: Resources,
) -> None:
    async with resources.sessionmaker() as session, session.begin():
        await seed_campaign(session, await seed_account(session))
    ids = await store(
        resources,
        comments_body(comment_value("ok-1")),
        comments_body(comment_value("bad", "GUIDE POISON")),
        comments_body(comment_value("ok-2")),
    )
    # A database rule this code knows nothing about stands in for any failure that would
    # make one event fail every time (a bug, an unforeseen value).
    async with resources.engine.begin() as conn:
        await conn.execute(
            text("ALTER TABLE comments ADD CONSTRAINT test_poison CHECK (text NOT LIKE '%POISON%')")
        )
    try:
        summary = await run_ingest(resources, ids)
    finally:
        async with resources.engine.begin() as conn:
            await conn.execute(text("ALTER TABLE comments DROP CONSTRAINT test_poison"))

    assert summary["processed"] == 2
    assert summary["deliveries"] == 2
    events = {e.id: e for e in await rows(resources, WebhookEvent)}
    assert events[ids[1]].status is WebhookStatus.REJECTED
    assert "CheckViolation" in (events[ids[1]].reject_reason or "")
    assert sorted(c.comment_id for c in await rows(resources, Comment)) == ["ok-1", "ok-2"]
    (alert,) = await rows(
        resources, OperationalEvent, OperationalEvent.kind == "webhook_ingest_failed"
    )
    assert str(ids[1]) in alert.message

    # Once the cause is fixed (the rule is gone), the operator re-drives the set-aside event;
    # an event refused for its content would not come back.
    refused = await store(resources, b"[]")
    async with resources.sessionmaker() as session, session.begin():
        await session.execute(
            update(WebhookEvent)
            .where(WebhookEvent.id == refused[0])
            .values(status=WebhookStatus.REJECTED, reject_reason="not a JSON object")
        )
        assert await redrive_failed(session) == 1
    again = await run_ingest(resources, [ids[1]])
    assert again["processed"] == 1
    assert sorted(c.comment_id for c in await rows(resources, Comment)) == ["bad", "ok-1", "ok-2"]
    events = {e.id: e for e in await rows(resources, WebhookEvent)}
    assert events[ids[1]].status is WebhookStatus.PROCESSED
    assert events[refused[0]].status is WebhookStatus.REJECTED


_WAITING_ON_A_LOCK = text(
    "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
    "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
)


async def test_a_connection_lost_during_ingest_is_retried_not_set_aside(
    resources: Resources,
) -> None:
    """A dropped connection (a PostgreSQL restart) says nothing about the events: the job
    fails so SAQ runs it again, and no event is rejected as if its body were bad."""
    async with resources.sessionmaker() as session, session.begin():
        await seed_campaign(session, await seed_account(session))
    ids = await store(
        resources,
        comments_body(comment_value("lost-1")),
        comments_body(comment_value("lost-2")),
    )
    # Ingest is held on a table lock, and every connection that waits on it is cut off, as
    # a server going away mid-transaction would: each attempt, batch or one by one, loses its
    # connection.
    async with resources.engine.connect() as locker, resources.engine.connect() as killer:
        await killer.execution_options(isolation_level="AUTOCOMMIT")
        await locker.begin()
        await locker.execute(text("LOCK TABLE comments IN ACCESS EXCLUSIVE MODE"))
        ingest = asyncio.create_task(run_ingest(resources, ids))
        cut = 0
        deadline = asyncio.get_running_loop().time() + 120
        while not ingest.done():
            assert asyncio.get_running_loop().time() < deadline, "ingest never reached the lock"
            for pid in (await killer.execute(_WAITING_ON_A_LOCK)).scalars():
                cut += bool(
                    (
                        await killer.execute(text("SELECT pg_terminate_backend(:p)"), {"p": pid})
                    ).scalar_one()
                )
            await asyncio.sleep(0.05)
        await locker.rollback()
    assert cut >= 1
    with pytest.raises(TRANSIENT_ERRORS):
        await ingest

    events = await rows(resources, WebhookEvent)
    assert {e.status for e in events} <= {WebhookStatus.RECEIVED, WebhookStatus.ENQUEUED}
    assert not await rows(
        resources, OperationalEvent, OperationalEvent.kind == "webhook_ingest_failed"
    )
    # SAQ's next run, with the database back, ingests them.
    assert (await run_ingest(resources, ids))["processed"] == 2
    assert sorted(c.comment_id for c in await rows(resources, Comment)) == ["lost-1", "lost-2"]


async def test_messaging_items_land_in_the_messaging_ledger_once(resources: Resources) -> None:
    async with resources.sessionmaker() as session, session.begin():
        account = await seed_account(session)
    ms = int(datetime.now(UTC).timestamp() * 1000)

    def inbound(**content: Any) -> dict[str, Any]:
        return {"sender": {"id": FAN}, "recipient": {"id": ACCOUNT}, "timestamp": ms, **content}

    items = [
        inbound(message={"mid": "m1", "text": "GUIDE"}),
        {
            "sender": {"id": ACCOUNT},
            "recipient": {"id": FAN},
            "timestamp": ms,
            "message": {"mid": "m2", "text": "Here", "is_echo": True},
        },
        inbound(message={"mid": "m3", "is_deleted": True}),
        inbound(message={"mid": "m4", "is_unsupported": True}),
        inbound(message={"mid": "m5", "attachments": [{"type": "image"}]}),
        inbound(postback={"mid": "p1", "title": "Get it", "payload": "reveal:1"}),
        inbound(read={"mid": "m2"}),
        inbound(reaction={"mid": "m2", "action": "react", "reaction": "love", "emoji": "❤️"}),
    ]
    body = messaging_body(*items)
    ids = await store(resources, body, body, messaging_body(items[0], account=OTHER_ACCOUNT))

    await run_ingest(resources, ids)

    recorded = {m.dedupe_key: m for m in await rows(resources, MessagingEvent)}
    assert {key: (m.kind, m.miss_reason, m.opens_window) for key, m in recorded.items()} == {
        # No DM-keyword campaign and no campaign behind the payload: records, not work.
        "message:m1": (Kind.MESSAGE, Miss.NO_MATCH, True),
        "echo:m2": (Kind.ECHO, Miss.ECHO, False),
        "message:m3": (Kind.MESSAGE, Miss.DELETED, False),
        "message:m4": (Kind.MESSAGE, Miss.UNSUPPORTED, True),
        "message:m5": (Kind.MESSAGE, Miss.NO_TEXT, True),
        f"postback:{FAN}:p1": (Kind.POSTBACK, Miss.UNKNOWN_PAYLOAD, True),
        f"read:{FAN}:m2": (Kind.READ, Miss.NOT_A_TRIGGER, False),
        f"reaction:{FAN}:m2:react:love": (Kind.REACTION, Miss.NOT_A_TRIGGER, True),
    }
    assert all(m.account_id == account.id for m in recorded.values())
    echo = recorded["echo:m2"]
    assert (echo.user_id, echo.text) == (FAN, "Here")
    assert recorded["message:m5"].details == {"attachments": ["image"]}
    assert await count(resources, Comment) == 0
    assert await count(resources, DmLog) == 0
    # The body came twice: its eight items are counted once each as duplicates absorbed.
    async with resources.engine.connect() as conn:
        hits = (
            await conn.execute(text("SELECT account_id, kind, hits FROM idempotency_hits"))
        ).all()
    assert [tuple(hit) for hit in hits] == [(account.id, "webhook_duplicate", 8)]
    events = {e.id: e for e in await rows(resources, WebhookEvent)}
    assert events[ids[1]].details == {"messaging": {"duplicate": 8}}
    assert events[ids[2]].details == {"messaging": {"unknown_account": 1}}


async def test_comments_of_an_account_with_a_backlog_go_to_its_pacer_not_a_job_each(
    resources: Resources,
) -> None:
    async with resources.sessionmaker() as session, session.begin():
        account = await seed_account(session)
        await seed_campaign(session, account)
        other = await seed_account(session, ig_user_id=OTHER_ACCOUNT, username="other.shop")
        await seed_campaign(session, other, media_id=OTHER_REEL)
        await session.execute(
            text("UPDATE instagram_accounts SET pr_backlog_since = now() WHERE id = :id"),
            {"id": account.id},
        )
    (event_id,) = await store(
        resources,
        comments_body(
            comment_value("17870000000000001"),
            comment_value("17870000000000002", commenter_id="9900000000000002", username="bo"),
        ),
    )
    (other_event,) = await store(
        resources,
        comments_body(
            comment_value("17870000000000003", media_id=OTHER_REEL), account=OTHER_ACCOUNT
        ),
    )

    summary = await run_ingest(resources, [event_id, other_event])

    assert summary["deliveries"] == 3
    other_log = (await rows(resources, DmLog, DmLog.account_id == other.id))[0]
    keys = await queued_keys(resources)
    assert sorted(keys) == sorted([f"deliver:{other_log.id}", f"pace:{account.id}"])
    paced = await rows(resources, DmLog, DmLog.account_id == account.id)
    assert [log.pr_state for log in paced] == [LegState.PENDING, LegState.PENDING]


async def test_more_new_comments_than_free_slots_go_to_the_pacer_at_once(
    resources: Resources,
) -> None:
    from app.delivery.send.budget import BudgetFull
    from app.delivery.send.budget_history import account_budget

    async with resources.sessionmaker() as session, session.begin():
        account = await seed_account(session)
        await seed_campaign(session, account)
    budget = account_budget(resources)
    for _ in range(budget.limit - 2):
        # Sends answered a moment ago: they hold their slots, none is in flight.
        slot = await budget.reserve(account.id)
        assert not isinstance(slot, BudgetFull), slot
        await budget.stamp(slot)
    (event_id,) = await store(
        resources,
        comments_body(
            *(
                comment_value(f"1787000000000000{n}", commenter_id=f"990000000000000{n}")
                for n in range(3)
            )
        ),
    )

    summary = await run_ingest(resources, [event_id])

    assert summary["deliveries"] == 3
    assert await queued_keys(resources) == [f"pace:{account.id}"]
    async with resources.sessionmaker() as session:
        backlog = await session.scalar(
            text("SELECT pr_backlog_since FROM instagram_accounts WHERE id = :id"),
            {"id": account.id},
        )
    assert backlog is not None


async def test_comments_arriving_one_at_a_time_go_to_the_pacer_once_they_outnumber_free_slots(
    resources: Resources,
) -> None:
    """A surge that reaches ingest in runs of one comment, while the workers have not yet run
    the earlier comments' jobs: once more comments wait than the budget has free slots, the
    account has a backlog and the next comment goes to its pacer, not to a job of its own."""
    from app.delivery.send.budget import BudgetFull
    from app.delivery.send.budget_history import account_budget

    async with resources.sessionmaker() as session, session.begin():
        account = await seed_account(session)
        await seed_campaign(session, account)
    budget = account_budget(resources)
    for _ in range(budget.limit - 2):
        # Sends answered a moment ago: they hold their slots, none is in flight.
        slot = await budget.reserve(account.id)
        assert not isinstance(slot, BudgetFull), slot
        await budget.stamp(slot)
    for n in range(3):
        (event_id,) = await store(
            resources,
            comments_body(
                comment_value(f"1787000000000001{n}", commenter_id=f"990000000000001{n}")
            ),
        )
        await run_ingest(resources, [event_id])
    logs = sorted(await rows(resources, DmLog, DmLog.account_id == account.id), key=lambda d: d.id)
    assert len(logs) == 3
    keys = await queued_keys(resources)
    # Two comments fit the two free slots: each has its job. The third does not.
    assert sorted(k for k in keys if k.startswith("deliver:")) == sorted(
        f"deliver:{log.id}" for log in logs[:2]
    )
    assert f"pace:{account.id}" in keys
    async with resources.sessionmaker() as session:
        backlog = await session.scalar(
            text("SELECT pr_backlog_since FROM instagram_accounts WHERE id = :id"),
            {"id": account.id},
        )
    assert backlog is not None
