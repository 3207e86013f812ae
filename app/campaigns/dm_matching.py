"""Which campaign answers a DM: the DM keyword trigger (`dm_trigger_enabled`), pure.

The same keyword rules as comments (`app.campaigns.matching`: normalization, emoji keywords,
numeric codes read from look-alike letters, modes, excluded keywords first), among the
account's active campaigns with the trigger on. A DM has no post, so scope plays no part and
the winner is the higher priority, then the older campaign, then the smaller id. A campaign
matching "any comment" never answers DMs: it would answer every message anyone sends; the
editor asks for keywords instead. A DM sent before the campaign went live is not its (as with
comments).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from app.campaigns.matching import CampaignRule, MessageText
from app.db.models import CampaignStatus, MatchMode


@dataclass(frozen=True, slots=True)
class DmMatch:
    campaign: CampaignRule
    keyword: str | None
    read_as_digits: str | None = None  # see `app.campaigns.matching.KeywordMatch`


def choose_dm_campaign(
    rules: Iterable[CampaignRule], text: str, *, sent_at: datetime | None = None
) -> DmMatch | None:
    """The campaign whose DM trigger `text` fires, or None."""
    if not text.strip():
        return None
    message = MessageText(text)
    best: tuple[tuple[int, datetime, int], DmMatch] | None = None
    for rule in rules:
        if (
            not rule.dm_trigger
            or rule.status is not CampaignStatus.ACTIVE
            or rule.match_mode is MatchMode.ANY_COMMENT
            or (
                sent_at is not None
                and rule.activated_at is not None
                and sent_at < rule.activated_at
            )
        ):
            continue
        result = rule.match(message)
        if not result.matched:
            continue
        rank = (-rule.priority, rule.created_at, rule.id)
        if best is None or rank < best[0]:
            best = (rank, DmMatch(rule, result.keyword, result.read_as_digits))
    return best[1] if best is not None else None
