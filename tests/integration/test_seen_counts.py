"""The comments a campaign saw, kept by the database as the ledger changes, agree with the rows.

Comments go in through the real ingest (`ingest_comments`): matched, lost to a campaign ranked
higher, excluded, without a keyword, on two accounts and four campaigns of one workspace. Then
the ledger changes every way it can: a comment re-decided by the reconciler's rematch, a fan's
data deletion (their decisions wiped, an account and its comments deleted), comments deleted
as a retention job would, rows moved across a local midnight of a half-hour zone. After each
change the kept counts (`comment_verdict_counts`, and the funnel that reads them) must equal a
count in Python over the `comments` rows themselves. Racing ingests of overlapping batches
must count each comment once.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import UTC, date, datetime, timedelta
from itertools import count
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy import select, text

from app.accounts.meta_callbacks import delete_user_data
from app.db.models import Campaign, CampaignScope, SeenVia, Workspace
from app.delivery.intake.comments import UNWATCHED, ingest_comments
from app.delivery_log.funnel import SEEN_VERDICTS, campaign_funnel, window_start
from app.instagram.signed_request import SignedRequest
from app.instagram.webhook_payload import CommentItem, comment_from_graph
from app.resources import Resources
from tests.support.dashboard import NORTH, SUNNY, add_account
from tests.support.log_data import add_campaign

KOLKATA = ZoneInfo("Asia/Kolkata")  # UTC+5:30: its days start at 18:30 UTC
POST, OTHER_POST, NEW_POST = "17918195224117851", "17918195224117852", "17918195224117853"
WORDS = ("recipe please", "bread recipe", "recipe free", "hello", "guide!", "GUIDE free", "🍋")
_ids = count(1)

# What the kept counts should hold, from the rows: per (campaign, verdict) and per
# (campaign, Kolkata day).
Oracle = tuple[Counter[tuple[int, str]], Counter[tuple[int, date]]]


def comment(account: str, post: str, person: int, words: str) -> CommentItem:
    data = {
        "id": f"1788{next(_ids):012d}",
        "text": words,
        "timestamp": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S+0000"),
        "from": {"id": str(9000 + person), "username": f"fan{person}"},
    }
    return comment_from_graph(account, post, data, fallback_time=datetime.now(UTC))


async def ingest(
    resources: Resources, comments: list[CommentItem], **options: Any
) -> dict[str, int]:
    async with resources.sessionmaker() as session, session.begin():
        result = await ingest_comments(session, comments, via=SeenVia.WEBHOOK, **options)
    return dict(result.totals())


async def oracle(resources: Resources) -> Oracle:
    """The verdicts in the ledger's rows, counted here (no SQL aggregate)."""
    verdicts: Counter[tuple[int, str]] = Counter()
    days: Counter[tuple[int, date]] = Counter()
    async with resources.engine.connect() as conn:
        rows = await conn.execute(text("SELECT created_at, decision FROM comments"))
        for created_at, decision in rows:
            for item in (decision or {}).get("considered", []):
                if item["verdict"] in SEEN_VERDICTS:
                    verdicts[(item["campaign_id"], item["verdict"])] += 1
                    days[(item["campaign_id"], created_at.astimezone(KOLKATA).date())] += 1
    return verdicts, days


async def kept(resources: Resources, campaigns: list[int], now: datetime) -> Oracle:
    """The same, as the funnel reads it from the kept counts."""
    verdicts: Counter[tuple[int, str]] = Counter()
    days: Counter[tuple[int, date]] = Counter()
    async with resources.sessionmaker() as session:
        for campaign_id in campaigns:
            campaign = await session.get(Campaign, campaign_id)
            if campaign is None:  # deleted with its account: its counts went with it
                continue
            funnel = await campaign_funnel(session, campaign, zone=KOLKATA, now=now)
            for miss in funnel.unanswered:
                verdicts[(campaign_id, miss.code)] += miss.count
            won = funnel.count("seen") - sum(miss.count for miss in funnel.unanswered)
            verdicts[(campaign_id, "won")] += won
            for day in funnel.days:
                days[(campaign_id, day.day)] += day.counts["seen"]
    return +verdicts, +days


async def assert_kept_counts_agree(
    resources: Resources, campaigns: list[int], now: datetime
) -> Oracle:
    expected = await oracle(resources)
    _, days = expected
    # Only the window's days are shown; the oracle's rows all fall inside it.
    first = window_start(KOLKATA, now).date()
    assert all(day >= first for _, day in days)
    assert await kept(resources, campaigns, now) == expected
    # The funnel read the totals (`comment_verdict_totals`) and the window's quarter hours
    # (`comment_verdict_counts`); no key of either sums to a negative count (a stripe alone
    # may: a comment counted by one connection and re-decided by another).
    async with resources.engine.connect() as conn:
        negative = await conn.scalar(
            text(
                "SELECT (SELECT count(*) FROM (SELECT 1 FROM comment_verdict_counts "
                "GROUP BY campaign_id, quarter, verdict HAVING sum(comments) < 0) q) "
                "+ (SELECT count(*) FROM (SELECT 1 FROM comment_verdict_totals "
                "GROUP BY campaign_id, verdict HAVING sum(comments) < 0) t)"
            )
        )
    assert negative == 0
    return expected


async def move_across_midnight(resources: Resources, now: datetime) -> None:
    """Spread the ledger's rows around Kolkata's last two midnights (18:30 UTC), in quarter
    hours and odd minutes, as comments made then would be."""
    midnight = datetime.combine(now.astimezone(KOLKATA).date(), datetime.min.time(), KOLKATA)
    async with resources.engine.begin() as conn:
        await conn.execute(
            text(
                "UPDATE comments SET created_at = :midnight - (id % 3) * interval '1 day' "
                "+ ((id % 11) - 5) * interval '7 minutes'"
            ),
            {"midnight": midnight},
        )


async def test_kept_seen_counts_follow_every_change_of_the_ledger(
    resources: Resources,
) -> None:
    now = datetime.now(UTC)
    async with resources.sessionmaker() as session, session.begin():
        workspace = Workspace(name="Bakery", time_zone="Asia/Kolkata")
        session.add(workspace)
        await session.flush()
        workspace_id = workspace.id
    sunny = await add_account(resources, workspace_id, ig_user_id=SUNNY)
    north = await add_account(resources, workspace_id, ig_user_id=NORTH, username="north.trails")
    recipe = await add_campaign(
        resources, workspace_id, sunny, "Recipe", keywords=["recipe"], excluded_keywords=["free"]
    )
    bread = await add_campaign(
        resources, workspace_id, sunny, "Bread", keywords=["bread"], priority=5
    )
    # North's campaigns watch one post each: comments on another are no_campaign_for_post
    # until a campaign for that post comes (then the reconciler's rematch re-decides them).
    guide = await add_campaign(
        resources,
        workspace_id,
        north,
        "Guide",
        keywords=["guide"],
        excluded_keywords=["free"],
        scope=CampaignScope.POST,
        media_id=POST,
    )
    only_post = await add_campaign(
        resources,
        workspace_id,
        north,
        "Only one post",
        keywords=["recipe"],
        scope=CampaignScope.POST,
        media_id=POST,
    )
    campaigns = [recipe, bread, guide, only_post]

    batch = [
        comment(account, post, person, WORDS[(person + n) % len(WORDS)])
        for n, (account, post) in enumerate(
            ((SUNNY, POST), (SUNNY, OTHER_POST), (NORTH, POST), (NORTH, NEW_POST))
        )
        for person in range(12)
    ]
    # A reply in a thread: no campaign judges it.
    replies = [
        comment_from_graph(
            SUNNY,
            POST,
            {
                "id": f"1788{next(_ids):012d}",
                "text": "recipe",
                "parent_id": "17870000000000001",
                "from": {"id": "9001", "username": "fan1"},
            },
            fallback_time=now,
        )
    ]
    totals = await ingest(resources, batch + replies)
    assert totals["matched"] > 0
    assert totals["miss:no_keyword"] > 0
    assert totals["miss:no_campaign_for_post"] > 0
    verdicts, _ = await assert_kept_counts_agree(resources, campaigns, now)
    assert {verdict for _, verdict in verdicts} == set(SEEN_VERDICTS)

    # The same comments again (a redelivered webhook): nothing changes.
    await ingest(resources, batch)
    await assert_kept_counts_agree(resources, campaigns, now)

    # Rows made around Kolkata's midnights land on their local days.
    await move_across_midnight(resources, now)
    _, days = await assert_kept_counts_agree(resources, campaigns, now)
    assert len({day for _, day in days}) >= 3

    # A campaign for the new post: the reconciler's rematch re-decides its misses.
    late = await add_campaign(
        resources,
        workspace_id,
        north,
        "New post",
        keywords=["recipe", "guide"],
        scope=CampaignScope.POST,
        media_id=NEW_POST,
        priority=9,
    )
    campaigns.append(late)
    again = [c for c in batch if c.media_id == NEW_POST]
    assert (await ingest(resources, again, rematch=UNWATCHED)).get("rematched")
    verdicts, _ = await assert_kept_counts_agree(resources, campaigns, now)
    assert verdicts[(late, "won")] > 0

    # A fan asks Meta to delete their data: their comments' decisions are wiped.
    async with resources.sessionmaker() as session, session.begin():
        await delete_user_data(session, SignedRequest(user_id="9003", issued_at=1, payload={}))
    await assert_kept_counts_agree(resources, campaigns, now)

    # A retention job deletes the oldest comments.
    async with resources.engine.begin() as conn:
        deleted = await conn.execute(
            text("DELETE FROM comments WHERE created_at < :cut"),
            {"cut": now - timedelta(hours=30)},
        )
        assert deleted.rowcount > 0
    await assert_kept_counts_agree(resources, campaigns, now)

    # North removes the app and asks for deletion: the account, its campaigns and its
    # comments go (the foreign keys cascade).
    async with resources.sessionmaker() as session, session.begin():
        await delete_user_data(session, SignedRequest(user_id=NORTH, issued_at=2, payload={}))
    async with resources.sessionmaker() as session:
        left = set(await session.scalars(select(Campaign.id)))
    assert left == {recipe, bread}
    async with resources.engine.connect() as conn:
        orphans = await conn.scalar(
            text(
                "SELECT (SELECT count(*) FROM comment_verdict_counts "
                "WHERE campaign_id <> ALL(:ids)) + (SELECT count(*) FROM comment_verdict_totals "
                "WHERE campaign_id <> ALL(:ids))"
            ),
            {"ids": [recipe, bread]},
        )
    assert orphans == 0
    verdicts, _ = await assert_kept_counts_agree(resources, campaigns, now)
    assert sum(verdicts.values()) > 0


async def test_racing_ingests_count_each_comment_once(resources: Resources) -> None:
    async with resources.sessionmaker() as session, session.begin():
        workspace = Workspace(name="Rush")
        session.add(workspace)
        await session.flush()
        workspace_id = workspace.id
    sunny = await add_account(resources, workspace_id, ig_user_id=SUNNY)
    recipe = await add_campaign(resources, workspace_id, sunny, "Recipe", keywords=["recipe"])
    bread = await add_campaign(
        resources, workspace_id, sunny, "Bread", keywords=["bread"], priority=5
    )
    comments = [comment(SUNNY, POST, n, WORDS[n % 4]) for n in range(240)]
    # Eight batches, each overlapping the next by half: every comment is in two batches.
    batches = [comments[start : start + 60] for start in range(0, 240, 30)]
    batches[-1] += comments[:30]
    started = asyncio.Event()
    ready = 0

    async def one(batch: list[CommentItem]) -> dict[str, int]:
        nonlocal ready
        async with resources.sessionmaker() as session, session.begin():
            # Every task holds an open transaction on its own connection before any writes.
            await session.execute(text("SELECT 1"))
            ready += 1
            if ready == len(batches):
                started.set()
            await started.wait()
            result = await ingest_comments(session, batch, via=SeenVia.WEBHOOK)
        return dict(result.totals())

    results = await asyncio.gather(*(one(batch) for batch in batches))
    assert sum(r.get("new", 0) for r in results) == len(comments)
    assert sum(r.get("duplicate", 0) for r in results) == len(comments)
    verdicts, _ = await assert_kept_counts_agree(resources, [recipe, bread], datetime.now(UTC))
    # Both campaigns judge every comment (won, lost or no keyword): two verdicts each.
    assert sum(verdicts.values()) == 2 * len(comments)
    async with resources.engine.connect() as conn:
        in_ledger = await conn.scalar(text("SELECT count(*) FROM comments"))
    assert in_ledger == len(comments)
