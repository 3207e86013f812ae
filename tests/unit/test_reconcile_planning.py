"""The pure planning steps of the reconciler and of next-post binding."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from app.campaigns.matching import CampaignRule
from app.db.models import CampaignScope, CampaignStatus, MatchMode
from app.delivery.recovery.next_post import Published, Waiting, plan_bindings
from app.delivery.recovery.reconcile_plan import LOOKBACK, MediaTarget, pick_new, plan_targets
from app.instagram.webhook_payload import CommentItem

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
ACCOUNT = "17841405822304914"


def rule(
    campaign_id: int,
    scope: CampaignScope,
    media_id: str | None = None,
    *,
    activated: timedelta | None = timedelta(hours=1),
    created: timedelta = timedelta(days=30),
) -> CampaignRule:
    return CampaignRule(
        id=campaign_id,
        name=f"c{campaign_id}",
        status=CampaignStatus.ACTIVE,
        scope=scope,
        media_id=media_id,
        keywords=("guide",),
        excluded_keywords=(),
        match_mode=MatchMode.WHOLE_WORD,
        priority=0,
        created_at=NOW - created,
        activated_at=NOW - activated if activated is not None else None,
    )


def comment(
    comment_id: str, minutes_ago: int, text: str = "GUIDE", media: str = "m1"
) -> CommentItem:
    return CommentItem(
        account_ig_id=ACCOUNT,
        comment_id=comment_id,
        text=text,
        commenter_id=f"fan-{comment_id}",
        commenter_username=None,
        is_own=False,
        media_id=media,
        original_media_id=None,
        media_product_type=None,
        parent_id=None,
        commented_at=NOW - timedelta(minutes=minutes_ago),
    )


def test_each_media_is_read_back_to_the_earliest_floor_of_its_campaigns() -> None:
    targets = plan_targets(
        [
            rule(1, CampaignScope.POST, "m1", activated=timedelta(hours=5)),
            rule(2, CampaignScope.ANY_POST, activated=timedelta(days=10)),
            rule(3, CampaignScope.NEXT_POST, None),  # not bound yet: nothing to read
            rule(4, CampaignScope.NEXT_POST, "m9", activated=None, created=timedelta(hours=2)),
        ],
        now=NOW,
        recent_media=["m2", "m1"],
        ad_copies={"ad1": "m1", "ad7": "elsewhere"},
    )
    assert targets == [
        # m1: the post campaign (5 h) and the any-post one (capped at the 72 h lookback).
        MediaTarget("m1", NOW - LOOKBACK),
        MediaTarget("ad1", NOW - timedelta(hours=5), original_media_id="m1"),
        # Never activated on record: not before it existed.
        MediaTarget("m9", NOW - timedelta(hours=2)),
        MediaTarget("m2", NOW - LOOKBACK),
    ]


def test_new_comments_are_taken_oldest_first_up_to_the_cap_per_media() -> None:
    rules = [rule(1, CampaignScope.ANY_POST, activated=timedelta(days=1))]
    newest_first = [comment(f"a{n}", minutes_ago=n) for n in range(40)]
    newest_first.insert(5, comment("miss", minutes_ago=5, text="nice"))
    other = [comment("b1", 3, media="m2"), comment("known", 2, media="m2")]
    chosen, deferred = pick_new(
        {"m1": newest_first, "m2": other}, in_ledger={"known", "a39"}, rules=rules, cap=30
    )
    # a39 is already in the ledger, "miss" matches no campaign: a38 … a9 are the 30 oldest.
    assert [c.comment_id for c in chosen] == [f"a{n}" for n in range(38, 8, -1)] + ["b1"]
    assert deferred == 9


def test_comments_made_in_the_same_second_keep_their_listed_order() -> None:
    rules = [rule(1, CampaignScope.ANY_POST)]
    same_second = [comment(f"c{n}", minutes_ago=0) for n in range(3)]  # listed newest first
    chosen, _ = pick_new({"m1": same_second}, in_ledger=set(), rules=rules, cap=2)
    assert [c.comment_id for c in chosen] == ["c2", "c1"]


def published(media_id: str, minutes_ago: float, product: str | None = "REELS") -> Published:
    return Published(media_id, NOW - timedelta(minutes=minutes_ago), product)


def test_the_oldest_armed_campaign_takes_the_earliest_later_post() -> None:
    older = Waiting(1, "older", NOW - timedelta(minutes=30))
    newer = Waiting(2, "newer", NOW - timedelta(minutes=10))
    media = [
        published("r3", 1),
        published("ad", 4, "AD"),
        published("r2", 5),
        published("r1", 20),
        published("old", 40),
    ]
    bindings, refusals = plan_bindings([newer, older], media, targeted={})
    assert [(b.campaign.id, b.media.id) for b in bindings] == [(1, "r1"), (2, "r2")]
    assert refusals == []


def test_a_targeted_post_is_refused_and_a_bound_one_passed_over() -> None:
    waiting = Waiting(1, "w", NOW - timedelta(minutes=30))
    media = [published("r3", 1), published("r2", 5), published("r1", 20)]
    bindings, refusals = plan_bindings([waiting], media, targeted={"r1": "Specific"}, bound={"r2"})
    assert [(b.campaign.id, b.media.id) for b in bindings] == [(1, "r3")]
    assert [(r.media.id, r.taken_by) for r in refusals] == [("r1", "Specific")]


def test_a_post_from_the_arming_second_counts_as_next() -> None:
    armed = NOW + timedelta(microseconds=700_000)
    bindings, _ = plan_bindings(
        [Waiting(1, "w", armed)], [published("same-second", 0)], targeted={}
    )
    assert [b.media.id for b in bindings] == ["same-second"]
