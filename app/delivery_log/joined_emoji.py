"""The Misses page's hint for an emoji keyword a message held only joined into another emoji.

A campaign whose keyword is 👨 does not answer "👨‍👩‍👧": the family is an emoji of its own
(`app.campaigns.emoji`), and so is ❤️‍🔥 for 🔥. *Try a comment* says so
(`app.campaigns.matching.inside_an_emoji`); so does the Misses page, in the same words, for
each comment or story reply it lists.

The hint is worked out when the page is drawn, from the campaigns' keywords as they are now.
A comment's ledger decision names each campaign that found no keyword in it; a story reply's
names none, so the account's active story-reply campaigns are asked. A campaign that now
matches the message (its creator has since added the joined emoji) gets no hint. Only a
message with a zero-width joiner can hold a joined emoji, so a page without one costs no query.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.campaigns.matching import Verdict, inside_an_emoji, match_keywords
from app.campaigns.story_matching import StoryMiss
from app.db.bounds import id_in_range
from app.db.models import Campaign, CampaignStatus, CampaignTrigger, MatchMode
from app.delivery_log.misses import MissRow
from app.delivery_log.story_misses import StoryMissRow

_ZWJ = "\u200d"


@dataclass(frozen=True, slots=True)
class JoinedEmoji:
    campaign_name: str
    keyword: str  # the campaign's emoji keyword, as the creator wrote it
    joined_into: str  # the message's emoji holding it, as written


@dataclass(frozen=True, slots=True)
class _Keywords:
    name: str
    keywords: list[str]
    mode: MatchMode


def _hint(text: str, campaign: _Keywords) -> JoinedEmoji | None:
    found = inside_an_emoji(text, campaign.keywords)
    if found is None or match_keywords(text, campaign.keywords, [], campaign.mode).matched:
        return None
    return JoinedEmoji(campaign.name, found[0], found[1])


def _hints(text: str, campaigns: Iterable[_Keywords]) -> list[JoinedEmoji]:
    return [hint for campaign in campaigns if (hint := _hint(text, campaign)) is not None]


async def _campaigns(session: AsyncSession, workspace_id: int, *where: Any) -> dict[int, Any]:
    rows = await session.execute(
        select(
            Campaign.id, Campaign.account_id, Campaign.name, Campaign.keywords, Campaign.match_mode
        )
        .where(Campaign.workspace_id == workspace_id, *where)
        .order_by(Campaign.id)
    )
    return {row.id: row for row in rows}


def _keywords(row: Any) -> _Keywords:
    return _Keywords(name=row.name, keywords=list(row.keywords or []), mode=row.match_mode)


def _no_keyword_campaigns(row: MissRow) -> list[int]:
    """The campaigns of a comment's decision that found no keyword in it."""
    return [
        item["campaign_id"]
        for item in row.considered
        if item.get("verdict") == Verdict.NO_KEYWORD
        and type(item.get("campaign_id")) is int
        and id_in_range(item["campaign_id"])
    ]


async def comment_hints(
    session: AsyncSession, workspace_id: int, rows: Sequence[MissRow]
) -> dict[int, list[JoinedEmoji]]:
    """Per missed comment (by its id), the campaigns' emoji keywords it held only joined."""
    asked = {row.id: _no_keyword_campaigns(row) for row in rows if _ZWJ in row.text}
    wanted = {campaign_id for ids in asked.values() for campaign_id in ids}
    if not wanted:
        return {}
    campaigns = await _campaigns(session, workspace_id, Campaign.id.in_(wanted))
    found: dict[int, list[JoinedEmoji]] = {}
    for row in rows:
        known = [_keywords(campaigns[c]) for c in asked.get(row.id, []) if c in campaigns]
        if hints := _hints(row.text, known):
            found[row.id] = hints
    return found


async def story_hints(
    session: AsyncSession, workspace_id: int, rows: Sequence[StoryMissRow]
) -> dict[int, list[JoinedEmoji]]:
    """Per missed story reply (by its id), the account's active story-reply campaigns' emoji
    keywords it held only joined."""
    asked = [
        row
        for row in rows
        if row.text
        and _ZWJ in row.text
        and not row.is_mention
        and row.details.get("story_miss") == StoryMiss.NO_KEYWORD
    ]
    if not asked:
        return {}
    campaigns = await _campaigns(
        session,
        workspace_id,
        Campaign.account_id.in_({row.account_id for row in asked}),
        Campaign.trigger == CampaignTrigger.STORY_REPLIES,
        Campaign.status == CampaignStatus.ACTIVE,
    )
    found: dict[int, list[JoinedEmoji]] = {}
    for row in asked:
        mine = [_keywords(c) for c in campaigns.values() if c.account_id == row.account_id]
        if hints := _hints(row.text or "", mine):
            found[row.id] = hints
    return found
