"""Which campaign answers a story reply or a story mention, pure.

A campaign's trigger (`CampaignTrigger`) says what it answers. A story-reply campaign answers
replies to the account's stories — every story, or one chosen story while it is live — with
the same keyword rules as comments (`app.campaigns.matching`: emoji keywords, numeric codes,
modes, excluded keywords first; "any comment" is "any reply"). A story-mention campaign
answers every story that mentions the account; it has no keywords (a mention carries no text).

Only active campaigns take part, and a reply or mention sent before a campaign went live is
not its. When none answers, `story_reply_miss` and `story_mention_miss` say why, in the
order a creator would check: no such campaign, not live yet, another story, an excluded
word, no keyword. Winner: a campaign on this very story beats an every-story one; then the higher
priority, the older campaign, the smaller id.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from app.campaigns.matching import CampaignRule, KeywordMatch, MessageText
from app.db.models import CampaignStatus, CampaignTrigger, MatchMode

# The `campaigns` columns a story rule needs beyond a `CampaignRule`'s.
STORY_COLUMNS = ("trigger", "story_id", "story_expires_at")


@dataclass(frozen=True, slots=True)
class StoryRule:
    """A story-reply or story-mention campaign, for matching."""

    rule: CampaignRule
    trigger: CampaignTrigger
    story_id: str | None = None  # story replies: the one story answered (None: every story)
    story_expires_at: datetime | None = None  # when that story stops being live

    @classmethod
    def from_mapping(cls, row: Mapping[Any, Any]) -> StoryRule:
        """From anything holding `RULE_COLUMNS` and `STORY_COLUMNS`."""
        return cls(
            rule=CampaignRule.from_mapping(row),
            trigger=CampaignTrigger(row["trigger"]),
            story_id=row["story_id"],
            story_expires_at=row["story_expires_at"],
        )


class StoryMiss(StrEnum):
    """Why no story campaign answered a story reply or mention (kept in the ledger)."""

    NO_CAMPAIGN = "no_story_campaign"  # no active campaign of this trigger
    BEFORE_ACTIVATION = "before_activation"  # sent before every such campaign went live
    OTHER_STORY = "other_story"  # the campaigns watch other stories, or their story ended
    EXCLUDED = "excluded_keyword"
    NO_KEYWORD = "no_keyword"


@dataclass(frozen=True, slots=True)
class StoryMatch:
    campaign: CampaignRule
    keyword: str | None
    specific: bool = False  # the campaign is on this very story
    read_as_digits: str | None = None  # see `app.campaigns.matching.KeywordMatch`


def _live(rule: StoryRule, sent_at: datetime) -> bool:
    return rule.rule.status is CampaignStatus.ACTIVE and _activated(rule, sent_at)


def _activated(rule: StoryRule, sent_at: datetime) -> bool:
    activated_at = rule.rule.activated_at
    # Instagram stamps messages in milliseconds; compare whole seconds, as for comments.
    return activated_at is None or sent_at >= activated_at.replace(microsecond=0)


def _covers(rule: StoryRule, story_id: str | None, sent_at: datetime) -> bool:
    """Does this story-reply campaign watch `story_id` at `sent_at`?"""
    if rule.story_id is None:
        return True
    return rule.story_id == story_id and (
        rule.story_expires_at is None or sent_at < rule.story_expires_at
    )


def choose_story_reply_campaign(
    rules: Iterable[StoryRule], *, story_id: str | None, text: str, sent_at: datetime
) -> StoryMatch | None:
    """The campaign that answers a reply saying `text` to the story `story_id`, or None."""
    message = MessageText(text)
    best: tuple[tuple[int, int, datetime, int], StoryMatch] | None = None
    for rule in rules:
        if rule.trigger is not CampaignTrigger.STORY_REPLIES or not _live(rule, sent_at):
            continue
        if not _covers(rule, story_id, sent_at):
            continue
        campaign = rule.rule
        if not text.strip():
            # A photo or sticker reply: only "any reply" answers it (no keyword can match).
            if campaign.match_mode is not MatchMode.ANY_COMMENT:
                continue
            result = KeywordMatch(True)
        else:
            result = campaign.match(message)
        if not result.matched:
            continue
        specific = rule.story_id is not None
        rank = (0 if specific else 1, -campaign.priority, campaign.created_at, campaign.id)
        if best is None or rank < best[0]:
            best = (rank, StoryMatch(campaign, result.keyword, specific, result.read_as_digits))
    return best[1] if best is not None else None


def choose_story_mention_campaign(
    rules: Iterable[StoryRule], *, sent_at: datetime
) -> StoryMatch | None:
    """The campaign that thanks a person for mentioning the account in their story, or None."""
    best: tuple[tuple[int, datetime, int], StoryMatch] | None = None
    for rule in rules:
        if rule.trigger is not CampaignTrigger.STORY_MENTIONS or not _live(rule, sent_at):
            continue
        campaign = rule.rule
        rank = (-campaign.priority, campaign.created_at, campaign.id)
        if best is None or rank < best[0]:
            best = (rank, StoryMatch(campaign, None))
    return best[1] if best is not None else None


def story_reply_miss(
    rules: Iterable[StoryRule], *, story_id: str | None, text: str, sent_at: datetime
) -> StoryMiss:
    """Why no campaign answers this story reply (call when `choose_story_reply_campaign`
    found none)."""
    active = [
        rule
        for rule in rules
        if rule.trigger is CampaignTrigger.STORY_REPLIES
        and rule.rule.status is CampaignStatus.ACTIVE
    ]
    if not active:
        return StoryMiss.NO_CAMPAIGN
    live = [rule for rule in active if _activated(rule, sent_at)]
    if not live:
        return StoryMiss.BEFORE_ACTIVATION
    watching = [rule for rule in live if _covers(rule, story_id, sent_at)]
    if not watching:
        return StoryMiss.OTHER_STORY
    message = MessageText(text)
    if text.strip() and any(rule.rule.match(message).excluded_by is not None for rule in watching):
        return StoryMiss.EXCLUDED
    return StoryMiss.NO_KEYWORD


def story_mention_miss(rules: Iterable[StoryRule], *, sent_at: datetime) -> StoryMiss:
    """Why no campaign thanks this story mention."""
    active = [
        rule
        for rule in rules
        if rule.trigger is CampaignTrigger.STORY_MENTIONS
        and rule.rule.status is CampaignStatus.ACTIVE
    ]
    if not active:
        return StoryMiss.NO_CAMPAIGN
    return StoryMiss.BEFORE_ACTIVATION
