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
emoji (keycaps like 1️⃣ included) separate words and are otherwise ignored. Letters and digits
of every script are word characters.

Three kinds of keyword:

- a text keyword (it has a letter or a digit): compared with the normalized comment, so
  emoji in the comment and in the keyword are ignored;
- an emoji keyword (one or more emoji and nothing else but spaces or punctuation, like `🔥` or
  `🙏🏽`): compared with the comment's emoji, each in the comparable form of
  `app.campaigns.emoji` (skin tones, gender signs and variation selectors ignored, ZWJ
  sequences whole); the comment's words are ignored;
- a numeric code (a text keyword made only of digits, like `2024`): as a text keyword, and
  when no keyword of the campaign matches as typed, a comment word with look-alike letters
  (`2O24`) is read as its number (`app.campaigns.numeric_codes`); the match then records the
  word as typed (`read_as_digits`).

A keyword with nothing to compare (punctuation only, a lone skin tone) can never match;
`keyword_is_matchable` lets an editor refuse it.

Modes (`MatchMode`); several keywords are OR'ed and the first one (in the campaign's order)
that matches is recorded, a keyword matching as typed before a numeric code read from look-alike
letters:

- `whole_word`: the keyword (one word or a phrase) appears with no letter or digit directly on
  either side. `Клод` matches "Клод, привет" but not "Клодом". Scripts written without spaces
  (Chinese, Japanese, Thai) have letters on both sides of almost every word, so a keyword
  there only matches when it stands alone between spaces or punctuation: use `contains` for
  those languages — `猫` whole-word does not match "我爱猫咪", `contains` does. An emoji
  keyword matches wherever its emoji stand next to each other (spaces and punctuation
  between them aside), also touching a word: `🔥` matches "guide🔥" and "🔥🔥🔥"; `🔥🔥`
  does not match "🔥 guide 🔥". A read numeric code is the whole word (`2O24`, not `2O245`).
- `contains`: the keyword appears anywhere, also inside a longer word (`Клод` ⊂ "Клодом").
  An emoji keyword as in `whole_word`: an emoji is never found inside another one (`👨` is not
  in the family `👨‍👩‍👧`, `❤️` not in `❤️‍🔥`). A numeric code is also found inside a word read
  as a number (`24` in `2O245`), never inside a word with other letters.
- `exact`: the whole comment is the keyword (ignoring case, accents, punctuation and emoji);
  for an emoji keyword, the comment is exactly those emoji (`🔥` matches "🔥!" and "🔥🏽",
  not "🔥🔥" or "🔥 yes").
- `any_comment`: every comment with some text, even emoji only.

Excluded keywords are checked first: a comment mentioning one never matches, whatever its
keywords say. They match like `contains` in `contains` mode and as whole words otherwise,
and only as typed (a look-alike letter is never read as a digit for them).

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

from app.campaigns.emoji import SEP, emoji_key, emoji_keyword_key, joined_parts
from app.campaigns.numeric_codes import ReadWord, is_numeric_code, read_as_numbers
from app.db.models import Campaign, CampaignScope, CampaignStatus, MatchMode, MissReason

# Voiced/semi-voiced sound marks: が is か + U+3099; dropping them would change the word.
_KEPT_MARKS = frozenset("\u3099\u309a")
# Arabic tatweel only stretches a word for looks.
_DROPPED_LETTERS = frozenset("\u0640")
_ASCII_NON_WORD = re.compile(r"[^a-z0-9]+")
_ASCII_NON_WORD_CASED = re.compile(r"[^A-Za-z0-9]+")
_DIGIT_BY_LOOK_ALIKE = re.compile(r"[0-9][oil]|[oil][0-9]")
# A keycap (1️⃣) is an emoji like any other, not the digit it shows.
_KEYCAP = re.compile("[0-9#*]\ufe0f?\u20e3")
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
    return _normalize(text, fold=True)


def words_as_typed(text: str) -> list[str]:
    """The words of `normalize(text)`, with their case kept."""
    return _normalize(text, fold=False).split()


def _normalize(text: str, *, fold: bool) -> str:
    if text.isascii():
        if fold:
            return " ".join(_ASCII_NON_WORD.sub(" ", text.lower()).split())
        return " ".join(_ASCII_NON_WORD_CASED.sub(" ", text).split())
    if "\u20e3" in text:
        text = _KEYCAP.sub(" ", text)
    kept: list[str] = []
    for char in unicodedata.normalize("NFKD", text):
        category = unicodedata.category(char)
        if category == "Mn" and char not in _KEPT_MARKS:
            continue
        if category == "Cf" or char in _DROPPED_LETTERS:
            continue
        kept.append(char if category[0] in "LNM" else " ")
    composed = unicodedata.normalize("NFC", "".join(kept))
    return " ".join((composed.casefold() if fold else composed).split())


@dataclass(frozen=True, slots=True)
class Keyword:
    """A keyword ready to compare: see the module docstring for its three kinds."""

    raw: str  # as the creator wrote it
    text: str = ""  # normalized; "" for an emoji keyword
    emoji: str = ""  # `emoji_keyword_key`; "" for a text keyword
    code: bool = False  # only digits: a word with look-alike letters may read as it
    padded: str = field(init=False, repr=False, compare=False, default="")

    def __post_init__(self) -> None:
        # Whole words are found between spaces: " text " in " comment ".
        object.__setattr__(self, "padded", f" {self.text} ")

    @classmethod
    def of(cls, raw: str) -> Keyword | None:
        """None for a keyword that can never match."""
        emoji = emoji_keyword_key(raw)
        if emoji is not None:
            return cls(raw, emoji=emoji)
        text = normalize(raw)
        return cls(raw, text=text, code=is_numeric_code(text)) if text else None


def prepare_keywords(keywords: Iterable[str]) -> tuple[Keyword, ...]:
    """The keywords that can match, ready to compare, in their order."""
    return tuple(k for k in map(Keyword.of, keywords) if k is not None)


def keyword_is_matchable(keyword: str) -> bool:
    """False for a keyword with no letter, digit or emoji (punctuation, a lone skin tone)."""
    return Keyword.of(keyword) is not None


class MessageText:
    """A comment's or DM's text with its comparable forms, each worked out once, when asked."""

    __slots__ = ("_emoji", "_numbers", "padded", "raw", "text")

    def __init__(self, raw: str) -> None:
        self.raw = raw
        self.text = normalize(raw)
        self.padded = f" {self.text} "
        self._emoji: str | None = None
        self._numbers: list[ReadWord] | None = None

    @property
    def emoji(self) -> str:
        if self._emoji is None:
            self._emoji = emoji_key(self.raw)
        return self._emoji

    @property
    def numbers(self) -> list[ReadWord]:
        """Its words that read as a number thanks to look-alike letters."""
        if self._numbers is None:
            # Such a word has a digit next to a look-alike: most texts have none, and skip
            # the second normalization.
            maybe = _DIGIT_BY_LOOK_ALIKE.search(self.text) is not None
            self._numbers = read_as_numbers(words_as_typed(self.raw)) if maybe else []
        return self._numbers


@dataclass(frozen=True, slots=True)
class KeywordMatch:
    matched: bool
    keyword: str | None = None  # the matching keyword as the creator wrote it
    excluded_by: str | None = None  # the excluded keyword found in the comment
    # The comment's word that matched a numeric code once its look-alike letters were read
    # as digits ("2O24" for 2024); None when the keyword matched as typed.
    read_as_digits: str | None = None


def match_keywords(
    text: str, keywords: Iterable[str], excluded: Iterable[str], mode: MatchMode
) -> KeywordMatch:
    """Does `text` trigger a campaign with these keywords in this mode?"""
    return match_prepared(
        MessageText(text), prepare_keywords(keywords), prepare_keywords(excluded), mode
    )


def inside_a_word(text: str, keywords: Iterable[str]) -> str | None:
    """A keyword that a whole-word campaign missed only because it appears inside a longer
    word of `text` ("recipe" in "recipes?"), for telling the creator why."""
    found = match_prepared(MessageText(text), prepare_keywords(keywords), (), MatchMode.CONTAINS)
    return found.keyword


def inside_an_emoji(text: str, keywords: Iterable[str]) -> tuple[str, str] | None:
    """An emoji keyword that missed only because `text` has it joined into another emoji (👨
    in the family 👨‍👩‍👧), with that emoji as written, for telling the creator why."""
    parts = joined_parts(text)
    if not parts:
        return None
    for keyword in prepare_keywords(keywords):
        unit = keyword.emoji.strip(SEP)
        if keyword.emoji and SEP not in unit and unit in parts:
            return keyword.raw, parts[unit]
    return None


def _first_found(
    keywords: Sequence[Keyword], message: MessageText, mode: MatchMode
) -> Keyword | None:
    """The first of `keywords` that `message` holds in this mode (one loop per mode: this runs
    for every campaign on every comment)."""
    if mode is MatchMode.WHOLE_WORD:
        padded = message.padded
        for keyword in keywords:
            if keyword.emoji in message.emoji if keyword.emoji else keyword.padded in padded:
                return keyword
    elif mode is MatchMode.CONTAINS:
        text = message.text
        for keyword in keywords:
            if keyword.emoji in message.emoji if keyword.emoji else keyword.text in text:
                return keyword
    else:
        text = message.text
        for keyword in keywords:
            if keyword.emoji == message.emoji if keyword.emoji else keyword.text == text:
                return keyword
    return None


def _read_as(code: str, message: MessageText, mode: MatchMode) -> ReadWord | None:
    """The comment's word that reads as numeric code `code` in this mode, if any."""
    if mode is MatchMode.EXACT and " " in message.text:
        return None
    for word in message.numbers:
        found = code in word.digits if mode is MatchMode.CONTAINS else code == word.digits
        if found:
            return word
    return None


def read_from(text: str, keyword: str) -> str | None:
    """The word of `text` that the number code `keyword` was read from, when it matches only
    so (for a DM or story reply, whose row keeps its text and keyword but no decision)."""
    code = Keyword.of(keyword)
    if code is None or not code.code:
        return None
    message = MessageText(text)
    if code.text in message.text:
        return None
    return next((word.typed for word in message.numbers if code.text in word.digits), None)


def match_prepared(
    message: MessageText,
    keywords: Sequence[Keyword],
    excluded: Sequence[Keyword],
    mode: MatchMode,
) -> KeywordMatch:
    """`match_keywords` for prepared keywords and text."""
    if excluded:
        excluding = MatchMode.CONTAINS if mode is MatchMode.CONTAINS else MatchMode.WHOLE_WORD
        if (found := _first_found(excluded, message, excluding)) is not None:
            return KeywordMatch(False, excluded_by=found.raw)
    if mode is MatchMode.ANY_COMMENT:
        return KeywordMatch(bool(message.raw.strip()))
    if (found := _first_found(keywords, message, mode)) is not None:
        return KeywordMatch(True, keyword=found.raw)
    for keyword in keywords:
        if keyword.code and (word := _read_as(keyword.text, message, mode)) is not None:
            return KeywordMatch(True, keyword=keyword.raw, read_as_digits=word.typed)
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
    _keywords_ready: tuple[Keyword, ...] = field(init=False, repr=False, compare=False, default=())
    _excluded_ready: tuple[Keyword, ...] = field(init=False, repr=False, compare=False, default=())

    def __post_init__(self) -> None:
        # Prepared once per rule, not once per comment.
        object.__setattr__(self, "_keywords_ready", prepare_keywords(self.keywords))
        object.__setattr__(self, "_excluded_ready", prepare_keywords(self.excluded_keywords))

    def match(self, message: MessageText) -> KeywordMatch:
        """Its keywords, excluded keywords and mode against `message`."""
        return match_prepared(message, self._keywords_ready, self._excluded_ready, self.match_mode)

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
    read_as_digits: str | None = None  # see `KeywordMatch`

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
        if self.read_as_digits is not None:
            data["read_as_digits"] = self.read_as_digits
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
    # The winner's numeric code was read from this word's look-alike letters (`KeywordMatch`).
    read_as_digits: str | None = None

    @property
    def matched(self) -> bool:
        return self.campaign_id is not None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "campaign_id": self.campaign_id,
            "campaign_name": self.campaign_name,
            "matched_keyword": self.matched_keyword,
            "miss_reason": self.miss_reason.value if self.miss_reason else None,
            "considered": [item.to_json() for item in self.considered],
        }
        if self.read_as_digits is not None:
            data["read_as_digits"] = self.read_as_digits
        return data


def miss(reason: MissReason, considered: list[Considered] | None = None) -> MatchDecision:
    return MatchDecision(None, None, None, reason, considered or [])


def choose_campaign(campaigns: Sequence[CampaignRule], comment: CommentFacts) -> MatchDecision:
    """The campaign that answers `comment`, or why none does; see the module docstring."""
    if comment.is_own:
        return miss(MissReason.OWN_COMMENT)
    if comment.parent_id:
        # Replies in a thread are conversations, not triggers; no campaign answers them.
        return miss(MissReason.REPLY_TO_COMMENT)
    message = MessageText(comment.text)
    media_ids = frozenset(m for m in (comment.media_id, comment.original_media_id) if m)
    verdicts: dict[int, Considered] = {}
    matched: list[tuple[tuple[int, int, datetime, int], CampaignRule, KeywordMatch]] = []
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
        result = match_prepared(
            message, rule._keywords_ready, rule._excluded_ready, rule.match_mode
        )
        if result.excluded_by is not None:
            verdicts[rule.id] = Considered(
                rule.id, rule.name, Verdict.EXCLUDED, keyword=result.excluded_by
            )
        elif not result.matched:
            verdicts[rule.id] = Considered(rule.id, rule.name, Verdict.NO_KEYWORD)
        else:
            rank = (0 if specific else 1, -rule.priority, rule.created_at, rule.id)
            matched.append((rank, rule, result))

    if matched:
        matched.sort(key=lambda item: item[0])
        _, winner, won = matched[0]
        verdicts[winner.id] = Considered(
            winner.id,
            winner.name,
            Verdict.WON,
            keyword=won.keyword,
            read_as_digits=won.read_as_digits,
        )
        for _, loser, lost in matched[1:]:
            verdicts[loser.id] = Considered(
                loser.id,
                loser.name,
                Verdict.LOST,
                keyword=lost.keyword,
                lost_to=winner.name,
                read_as_digits=lost.read_as_digits,
            )
        return MatchDecision(
            winner.id,
            winner.name,
            won.keyword,
            None,
            [verdicts[rule.id] for rule in campaigns],
            campaign=winner,
            read_as_digits=won.read_as_digits,
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
