"""Which campaign answers a story reply or a story mention: the trigger, the chosen story and
its life, keywords and exclusions, activation, and the winner among several."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from app.campaigns.matching import CampaignRule
from app.campaigns.story_matching import (
    StoryMiss,
    StoryRule,
    choose_story_mention_campaign,
    choose_story_reply_campaign,
    story_mention_miss,
    story_reply_miss,
)
from app.db.models import CampaignScope, CampaignStatus, CampaignTrigger, MatchMode

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
STORY = "17900000000000001"
OTHER = "17900000000000002"


def story_rule(
    id_: int,
    *,
    trigger: CampaignTrigger = CampaignTrigger.STORY_REPLIES,
    story_id: str | None = None,
    expires_at: datetime | None = None,
    keywords: tuple[str, ...] = ("loaf",),
    excluded: tuple[str, ...] = (),
    mode: MatchMode = MatchMode.WHOLE_WORD,
    priority: int = 0,
    age_days: int = 0,
    status: CampaignStatus = CampaignStatus.ACTIVE,
    activated_at: datetime | None = None,
) -> StoryRule:
    rule = CampaignRule(
        id=id_,
        name=f"s{id_}",
        status=status,
        scope=CampaignScope.ANY_POST,
        media_id=None,
        keywords=keywords,
        excluded_keywords=excluded,
        match_mode=mode,
        priority=priority,
        created_at=T0 - timedelta(days=age_days),
        activated_at=activated_at,
    )
    return StoryRule(rule, trigger, story_id, expires_at)


def reply(
    rules: list[StoryRule], text: str, story: str | None = STORY, at: datetime = T0
) -> int | None:
    match = choose_story_reply_campaign(rules, story_id=story, text=text, sent_at=at)
    return match.campaign.id if match else None


def test_a_reply_matches_the_keyword_modes_and_exclusions() -> None:
    assert reply([story_rule(1)], "LOAF please!") == 1
    assert reply([story_rule(1)], "loafs") is None
    assert reply([story_rule(1, mode=MatchMode.CONTAINS)], "loafs") == 1
    assert reply([story_rule(1, mode=MatchMode.EXACT)], "loaf please") is None
    assert reply([story_rule(1, excluded=("refund",))], "loaf refund") is None
    # "Any comment" is "any reply": an emoji-only reply too.
    assert reply([story_rule(1, keywords=(), mode=MatchMode.ANY_COMMENT)], "😍") == 1


def test_a_campaign_on_one_story_answers_only_that_story_while_it_is_live() -> None:
    one = story_rule(1, story_id=STORY, expires_at=T0 + timedelta(hours=1))
    assert reply([one], "loaf") == 1
    assert reply([one], "loaf", story=OTHER) is None
    assert reply([one], "loaf", story=None) is None
    assert reply([one], "loaf", at=T0 + timedelta(hours=1)) is None


def test_the_winner_is_the_campaign_on_this_story_then_priority_then_age() -> None:
    every = story_rule(1, priority=90)
    this = story_rule(2, story_id=STORY)
    assert reply([every, this], "loaf") == 2
    assert reply([every, this], "loaf", story=OTHER) == 1
    older, newer = story_rule(3, age_days=2), story_rule(4)
    assert reply([newer, older], "loaf") == 3
    assert reply([older, story_rule(5, priority=1)], "loaf") == 5


def test_only_active_story_reply_campaigns_live_before_the_reply_answer_it() -> None:
    assert reply([story_rule(1, status=CampaignStatus.PAUSED)], "loaf") is None
    assert reply([story_rule(1, activated_at=T0 + timedelta(seconds=1))], "loaf") is None
    # Activated within the reply's second: Instagram's stamps are coarser than ours.
    assert reply([story_rule(1, activated_at=T0 + timedelta(microseconds=5))], "loaf") == 1
    assert reply([story_rule(1, trigger=CampaignTrigger.STORY_MENTIONS)], "loaf") is None
    assert reply([story_rule(1, trigger=CampaignTrigger.COMMENTS)], "loaf") is None


def test_a_mention_is_answered_by_the_highest_ranked_mention_campaign() -> None:
    mention = CampaignTrigger.STORY_MENTIONS

    def chosen(rules: list[StoryRule]) -> int | None:
        match = choose_story_mention_campaign(rules, sent_at=T0)
        return match.campaign.id if match else None

    assert chosen([story_rule(1)]) is None  # a story-reply campaign
    assert chosen([story_rule(1, trigger=mention), story_rule(2, trigger=mention, priority=5)]) == 2
    assert chosen([story_rule(1, trigger=mention, status=CampaignStatus.DRAFT)]) is None
    late = story_rule(1, trigger=mention, activated_at=T0 + timedelta(minutes=1))
    assert chosen([late]) is None


def test_why_no_story_campaign_answered() -> None:
    def why(rules: list[StoryRule], text: str = "loaf", story: str = STORY) -> StoryMiss:
        return story_reply_miss(rules, story_id=story, text=text, sent_at=T0)

    mention = CampaignTrigger.STORY_MENTIONS
    assert why([]) is StoryMiss.NO_CAMPAIGN
    assert why([story_rule(1, status=CampaignStatus.PAUSED)]) is StoryMiss.NO_CAMPAIGN
    assert why([story_rule(1, trigger=mention)]) is StoryMiss.NO_CAMPAIGN
    late = story_rule(1, activated_at=T0 + timedelta(minutes=1))
    assert why([late]) is StoryMiss.BEFORE_ACTIVATION
    assert why([story_rule(1, story_id=OTHER)]) is StoryMiss.OTHER_STORY
    ended = story_rule(1, story_id=STORY, expires_at=T0)
    assert why([ended]) is StoryMiss.OTHER_STORY
    assert why([story_rule(1, excluded=("refund",))], "loaf refund") is StoryMiss.EXCLUDED
    assert why([story_rule(1)], "nice") is StoryMiss.NO_KEYWORD

    assert story_mention_miss([story_rule(1)], sent_at=T0) is StoryMiss.NO_CAMPAIGN
    late_mention = story_rule(2, trigger=mention, activated_at=T0 + timedelta(minutes=1))
    assert story_mention_miss([late_mention], sent_at=T0) is StoryMiss.BEFORE_ACTIVATION


def test_a_reply_without_text_is_answered_only_by_any_reply() -> None:
    any_reply = story_rule(2, keywords=(), mode=MatchMode.ANY_COMMENT)
    assert reply([story_rule(1)], "") is None
    assert reply([story_rule(1), any_reply], "") == 2
    assert story_reply_miss([story_rule(1)], story_id=STORY, text="", sent_at=T0) is (
        StoryMiss.NO_KEYWORD
    )
