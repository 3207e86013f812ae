"""Which campaign answers a comment: text normalization, keyword modes, winner selection.

Pure functions over plain frozen dataclasses; no database, no I/O. The worker's ingest and
the dashboard's "Try a comment" call the same code:

    rules = [CampaignRule.from_model(c) for c in campaigns]        # or app.campaigns.rules
    decision = choose_campaign(rules, CommentFacts(text="GUIDE please", media_id="1789..."))
    decision.campaign_id, decision.campaign_name, decision.matched_keyword
    decision.miss_reason          # MissReason when no campaign answers, else None
    decision.considered           # one Considered per campaign: won, lost (to whom), why not
    decision.to_json()            # what the ledger stores in comments.decision

    match_keywords("Клод, привет!", ["клод"], [], MatchMode.WHOLE_WORD)  # -> KeywordMatch

Normalization (`normalize`): compatibility-decompose (NFKD, so full-width `ＧＵＩＤＥ` is
`GUIDE`), drop accents (combining marks — except the Japanese voicing marks, which change
the kana), case-fold, drop format characters (zero-width joiners, soft hyphens), and turn
every character that is not a letter, digit or spacing mark into a space: punctuation and
emoji separate words and are otherwise ignored. Letters and digits of every script are word
characters. A keyword that normalizes to nothing (emoji only) can never match;
`keyword_is_matchable` lets an editor refuse it.

Modes (`MatchMode`), on normalized text and keywords; several keywords are OR'ed and the
first one (in the campaign's order) that matches is recorded:

- `whole_word`: the keyword (one word or a phrase) appears with no letter or digit directly on
  either side. `Клод` matches "Клод, привет" but not "Клодом". Scripts written without spaces
  (Chinese, Japanese, Thai) have letters on both sides of almost every word, so a keyword
  there only matches when it stands alone between spaces or punctuation: use `contains` for
  those languages — `猫` whole-word does not match "我爱猫咪", `contains` does.
- `contains`: the keyword appears anywhere, also inside a longer word (`Клод` ⊂ "Клодом").
- `exact`: the whole comment is the keyword (ignoring case, accents, punctuation and emoji).
- `any_comment`: every comment with some text, even emoji only.

Excluded keywords are checked first: a comment mentioning one never matches, whatever its
keywords say. They match like `contains` in `contains` mode and as whole words otherwise.

Winner among matching campaigns: a campaign on this specific post (one-post scope, or a
next-post campaign once bound; ad copies count through `original_media_id`) beats an any-post
one; then higher `priority`; then the older campaign; then the smaller id. Only active
campaigns take part; a comment made before a campaign was activated is not that campaign's.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from app.db.models import Campaign, CampaignScope, CampaignStatus, MatchMode, MissReason

# Voiced/semi-voiced sound marks: が is か + U+3099; dropping them would change the word.
_KEPT_MARKS = frozenset("\u3099\u309a")
# Arabic tatweel only stretches a word for looks.
_DROPPED_LETTERS = frozenset("\u0640")
_ASCII_NON_WORD = re.compile(r"[^a-z0-9]+")
# The `campaigns` columns a rule is built from.
RULE_COLUMNS = (
    "id",
    "name",
    "status",
    "scope",
    "media_id",
    "keywords",
    "excluded_keywords",
    "match_mode",
    "priority",
    "created_at",
    "account_id",
    "workspace_id",
    "version",
    "activated_at",
    "public_reply_enabled",
    "public_replies",
    "dm_trigger_enabled",
)


def normalize(text: str) -> str:
    """The comparable form of `text`: see the module docstring."""
    if text.isascii():
        return " ".join(_ASCII_NON_WORD.sub(" ", text.lower()).split())
    kept: list[str] = []
    for char in unicodedata.normalize("NFKD", text):
        category = unicodedata.category(char)
        if category == "Mn" and char not in _KEPT_MARKS:
            continue
        if category == "Cf" or char in _DROPPED_LETTERS:
            continue
        kept.append(char if category[0] in "LNM" else " ")
    folded = unicodedata.normalize("NFC", "".join(kept)).casefold()
    return " ".join(folded.split())


def keyword_is_matchable(keyword: str) -> bool:
    """False for a keyword that normalizes to nothing (only emoji or punctuation)."""
    return bool(normalize(keyword))


@dataclass(frozen=True, slots=True)
class KeywordMatch:
    matched: bool
    keyword: str | None = None  # the matching keyword as the creator wrote it
    excluded_by: str | None = None  # the excluded keyword found in the comment


def match_keywords(
    text: str, keywords: Iterable[str], excluded: Iterable[str], mode: MatchMode
) -> KeywordMatch:
    """Does `text` trigger a campaign with these keywords in this mode?"""
    return _match(
        text, normalize(text), _normalized_pairs(keywords), _normalized_pairs(excluded), mode
    )


def inside_a_word(text: str, keywords: Iterable[str]) -> str | None:
    """A keyword that a whole-word campaign missed only because it appears inside a longer
    word of `text` ("recipe" in "recipes?"), for telling the creator why."""
    found = _match(text, normalize(text), _normalized_pairs(keywords), (), MatchMode.CONTAINS)
    return found.keyword


def _normalized_pairs(keywords: Iterable[str]) -> tuple[tuple[str, str], ...]:
    pairs = ((keyword, normalize(keyword)) for keyword in keywords)
    return tuple((keyword, norm) for keyword, norm in pairs if norm)


def _match(
    raw_text: str,
    text: str,
    keywords: Sequence[tuple[str, str]],
    excluded: Sequence[tuple[str, str]],
    mode: MatchMode,
) -> KeywordMatch:
    padded = f" {text} "
    for keyword, norm in excluded:
        found = norm in text if mode is MatchMode.CONTAINS else f" {norm} " in padded
        if found:
            return KeywordMatch(False, excluded_by=keyword)
    if mode is MatchMode.ANY_COMMENT:
        return KeywordMatch(bool(raw_text.strip()))
    for keyword, norm in keywords:
        if mode is MatchMode.WHOLE_WORD:
            found = f" {norm} " in padded
        elif mode is MatchMode.CONTAINS:
            found = norm in text
        else:
            found = norm == text
        if found:
            return KeywordMatch(True, keyword=keyword)
    return KeywordMatch(False)


@dataclass(frozen=True, slots=True)
class CampaignRule:
    """What matching needs to know about a campaign (and ingest, to create its delivery)."""

    id: int
    name: str
    status: CampaignStatus
    scope: CampaignScope
    media_id: str | None
    keywords: tuple[str, ...]
    excluded_keywords: tuple[str, ...]
    match_mode: MatchMode
    priority: int
    created_at: datetime
    account_id: int = 0
    workspace_id: int = 0
    version: int = 1
    activated_at: datetime | None = None
    # Public replies enabled and at least one variant to post.
    public_reply: bool = False
    # Also answers DMs matching its keywords (`app.campaigns.dm_matching`).
    dm_trigger: bool = False
    _keywords_norm: tuple[tuple[str, str], ...] = field(
        init=False, repr=False, compare=False, default=()
    )
    _excluded_norm: tuple[tuple[str, str], ...] = field(
        init=False, repr=False, compare=False, default=()
    )

    def __post_init__(self) -> None:
        # Normalized once per rule, not once per comment.
        object.__setattr__(self, "_keywords_norm", _normalized_pairs(self.keywords))
        object.__setattr__(self, "_excluded_norm", _normalized_pairs(self.excluded_keywords))

    @classmethod
    def from_model(cls, campaign: Campaign) -> CampaignRule:
        return cls.from_mapping({name: getattr(campaign, name) for name in RULE_COLUMNS})

    @classmethod
    def from_mapping(cls, row: Mapping[Any, Any]) -> CampaignRule:
        """From anything holding the `campaigns` columns named in `RULE_COLUMNS`."""
        return cls(
            id=row["id"],
            name=row["name"],
            status=CampaignStatus(row["status"]),
            scope=CampaignScope(row["scope"]),
            media_id=row["media_id"],
            keywords=tuple(row["keywords"] or ()),
            excluded_keywords=tuple(row["excluded_keywords"] or ()),
            match_mode=MatchMode(row["match_mode"]),
            priority=row["priority"],
            created_at=row["created_at"],
            account_id=row["account_id"],
            workspace_id=row["workspace_id"],
            version=row["version"],
            activated_at=row["activated_at"],
            public_reply=bool(
                row["public_reply_enabled"]
                and any(reply.strip() for reply in row["public_replies"] or ())
            ),
            dm_trigger=bool(row["dm_trigger_enabled"]),
        )

    def covers(self, media_ids: frozenset[str]) -> bool | None:
        """True: this post specifically; False: any post; None: not this post."""
        if self.scope is CampaignScope.ANY_POST:
            return False
        return True if self.media_id is not None and self.media_id in media_ids else None


@dataclass(frozen=True, slots=True)
class CommentFacts:
    text: str
    media_id: str | None = None
    original_media_id: str | None = None
    commenter_id: str | None = None
    parent_id: str | None = None
    is_own: bool = False
    # When known (always, in ingest): a comment older than a campaign's activation is not its.
    commented_at: datetime | None = None


class Verdict(StrEnum):
    WON = "won"
    LOST = "lost"  # matched, but a campaign ranked higher won
    WRONG_POST = "wrong_post"
    NOT_BOUND = "not_bound"  # a next-post campaign whose post is not known yet
    INACTIVE = "inactive"
    BEFORE_ACTIVATION = "before_activation"
    EXCLUDED = "excluded"
    NO_KEYWORD = "no_keyword"


@dataclass(frozen=True, slots=True)
class Considered:
    campaign_id: int
    campaign_name: str
    verdict: Verdict
    keyword: str | None = None  # matched keyword (won, lost) or excluded keyword (excluded)
    lost_to: str | None = None  # the winner's name, for `lost`

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "campaign_id": self.campaign_id,
            "name": self.campaign_name,
            "verdict": self.verdict.value,
        }
        if self.keyword is not None:
            data["keyword"] = self.keyword
        if self.lost_to is not None:
            data["lost_to"] = self.lost_to
        return data


@dataclass(frozen=True, slots=True)
class MatchDecision:
    campaign_id: int | None
    campaign_name: str | None
    matched_keyword: str | None
    miss_reason: MissReason | None
    considered: list[Considered]
    # The winning rule itself, for callers that go on to create its delivery.
    campaign: CampaignRule | None = field(default=None, repr=False, compare=False)

    @property
    def matched(self) -> bool:
        return self.campaign_id is not None

    def to_json(self) -> dict[str, Any]:
        return {
            "campaign_id": self.campaign_id,
            "campaign_name": self.campaign_name,
            "matched_keyword": self.matched_keyword,
            "miss_reason": self.miss_reason.value if self.miss_reason else None,
            "considered": [item.to_json() for item in self.considered],
        }


def miss(reason: MissReason, considered: list[Considered] | None = None) -> MatchDecision:
    return MatchDecision(None, None, None, reason, considered or [])


def choose_campaign(campaigns: Sequence[CampaignRule], comment: CommentFacts) -> MatchDecision:
    """The campaign that answers `comment`, or why none does; see the module docstring."""
    if comment.is_own:
        return miss(MissReason.OWN_COMMENT)
    if comment.parent_id:
        # Replies in a thread are conversations, not triggers; no campaign answers them.
        return miss(MissReason.REPLY_TO_COMMENT)
    text = normalize(comment.text)
    media_ids = frozenset(m for m in (comment.media_id, comment.original_media_id) if m)
    verdicts: dict[int, Considered] = {}
    matched: list[tuple[tuple[int, int, datetime, int], CampaignRule, str | None]] = []
    active = in_scope = activated = 0
    for rule in campaigns:
        if rule.status is not CampaignStatus.ACTIVE:
            verdicts[rule.id] = Considered(rule.id, rule.name, Verdict.INACTIVE)
            continue
        active += 1
        specific = rule.covers(media_ids)
        if specific is None:
            unbound = rule.scope is CampaignScope.NEXT_POST and rule.media_id is None
            verdict = Verdict.NOT_BOUND if unbound else Verdict.WRONG_POST
            verdicts[rule.id] = Considered(rule.id, rule.name, verdict)
            continue
        in_scope += 1
        if (
            comment.commented_at is not None
            and rule.activated_at is not None
            # Instagram stamps comments in whole seconds: a comment made in the very second a
            # campaign went live reads as earlier than its activation, so compare seconds.
            and comment.commented_at < rule.activated_at.replace(microsecond=0)
        ):
            verdicts[rule.id] = Considered(rule.id, rule.name, Verdict.BEFORE_ACTIVATION)
            continue
        activated += 1
        result = _match(
            comment.text, text, rule._keywords_norm, rule._excluded_norm, rule.match_mode
        )
        if result.excluded_by is not None:
            verdicts[rule.id] = Considered(
                rule.id, rule.name, Verdict.EXCLUDED, keyword=result.excluded_by
            )
        elif not result.matched:
            verdicts[rule.id] = Considered(rule.id, rule.name, Verdict.NO_KEYWORD)
        else:
            rank = (0 if specific else 1, -rule.priority, rule.created_at, rule.id)
            matched.append((rank, rule, result.keyword))

    if matched:
        matched.sort(key=lambda item: item[0])
        _, winner, keyword = matched[0]
        verdicts[winner.id] = Considered(winner.id, winner.name, Verdict.WON, keyword=keyword)
        for _, loser, lost_keyword in matched[1:]:
            verdicts[loser.id] = Considered(
                loser.id, loser.name, Verdict.LOST, keyword=lost_keyword, lost_to=winner.name
            )
        return MatchDecision(
            winner.id,
            winner.name,
            keyword,
            None,
            [verdicts[rule.id] for rule in campaigns],
            campaign=winner,
        )

    considered = [verdicts[rule.id] for rule in campaigns]
    if not active:
        return miss(MissReason.NO_ACTIVE_CAMPAIGN, considered)
    if not in_scope:
        return miss(MissReason.NO_CAMPAIGN_FOR_POST, considered)
    if not activated:
        return miss(MissReason.BEFORE_ACTIVATION, considered)
    if not comment.text.strip():
        return miss(MissReason.EMPTY_TEXT, considered)
    if any(item.verdict is Verdict.EXCLUDED for item in considered):
        return miss(MissReason.EXCLUDED_KEYWORD, considered)
    return miss(MissReason.NO_KEYWORD, considered)
