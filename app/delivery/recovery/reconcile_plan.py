"""Planning a reconciler sweep, as pure functions: which media to read back how far, and which
of the comments read are worth backfilling.

`plan_targets`: each post-scoped (or bound next-post) campaign's media, plus ad copies of it
the ledger has seen (`original_media_id`), and for any-post campaigns the account's most
recent media. Each media is read back to its floor (`comment_floor`): `LOOKBACK` ago, and
never before the campaign became active, so activating a campaign is never a historical
blast.

`pick_new`: of what was read, the comments not in the ledger yet that an active campaign
would answer (the same matching as webhooks), oldest first, at most `MAX_NEW_PER_MEDIA` per
media per sweep; the rest wait for the next one, still well inside the 7-day private-reply
window.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from app.campaigns.matching import CampaignRule, choose_campaign
from app.db.models import CampaignScope
from app.delivery.intake.comments import comment_facts
from app.instagram.webhook_payload import CommentItem

LOOKBACK = timedelta(hours=72)
MAX_NEW_PER_MEDIA = 30


@dataclass(frozen=True, slots=True)
class MediaTarget:
    """One media to read, and the oldest comment time any campaign on it may answer."""

    media_id: str
    since: datetime
    original_media_id: str | None = None  # set when this is an ad copy of an organic post


def comment_floor(rule: CampaignRule, now: datetime) -> datetime:
    """The oldest comment time a sweep may answer for this campaign."""
    # A campaign cannot have been active before it existed: `created_at` stands in for a
    # missing activation time. Comment times are whole seconds, so the floor is too.
    return max(now - LOOKBACK, (rule.activated_at or rule.created_at).replace(microsecond=0))


def plan_targets(
    rules: Sequence[CampaignRule],
    *,
    now: datetime,
    recent_media: Sequence[str] = (),
    ad_copies: Mapping[str, str] | None = None,
) -> list[MediaTarget]:
    """The media a sweep reads, specific posts first; each with the earliest floor of the
    campaigns that cover it. `ad_copies` maps an ad copy's media id to its organic post."""
    targets: dict[str, MediaTarget] = {}

    def add(media_id: str, since: datetime, original: str | None = None) -> None:
        known = targets.get(media_id)
        if known is None or since < known.since:
            kept = original or (known.original_media_id if known else None)
            targets[media_id] = MediaTarget(media_id, since, kept)

    copies = ad_copies or {}
    for rule in rules:
        if rule.scope is CampaignScope.ANY_POST or rule.media_id is None:
            continue
        floor = comment_floor(rule, now)
        add(rule.media_id, floor)
        for copy_id, original in copies.items():
            if original == rule.media_id:
                add(copy_id, floor, original)
    for rule in rules:
        if rule.scope is CampaignScope.ANY_POST:
            for media_id in recent_media:
                add(media_id, comment_floor(rule, now))
    return list(targets.values())


def pick_new(
    found: Mapping[str, Sequence[CommentItem]],
    in_ledger: Collection[str],
    rules: Sequence[CampaignRule],
    *,
    cap: int = MAX_NEW_PER_MEDIA,
) -> tuple[list[CommentItem], int]:
    """(the comments to backfill, how many were left over the cap) from what was read.

    `found` lists each media's comments as Meta returned them, newest first; so the reverse
    order breaks ties between comments made in the same second.
    """
    chosen: list[CommentItem] = []
    deferred = 0
    for comments in found.values():
        fresh = [
            comment
            for comment in reversed(comments)
            if comment.comment_id not in in_ledger and _would_answer(rules, comment)
        ]
        fresh.sort(key=lambda comment: comment.commented_at)  # stable: keeps the tie order
        chosen.extend(fresh[:cap])
        deferred += max(0, len(fresh) - cap)
    return chosen, deferred


def _would_answer(rules: Sequence[CampaignRule], comment: CommentItem) -> bool:
    return choose_campaign(rules, comment_facts(comment)).matched
