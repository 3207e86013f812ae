"""Emoji keywords: variants of one emoji are equal, ZWJ sequences are whole, text keywords still
ignore emoji, in comments and in DM triggers."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.campaigns.dm_matching import choose_dm_campaign
from app.campaigns.emoji import emoji_keyword_key, emoji_units
from app.campaigns.matching import (
    CampaignRule,
    CommentFacts,
    choose_campaign,
    inside_a_word,
    inside_an_emoji,
    keyword_is_matchable,
    match_keywords,
)
from app.campaigns.story_matching import StoryRule, choose_story_reply_campaign
from app.db.models import CampaignScope, CampaignStatus, CampaignTrigger, MatchMode

W, C, E = MatchMode.WHOLE_WORD, MatchMode.CONTAINS, MatchMode.EXACT
KEYWORD_MODES = (W, C, E)
TONES = [chr(c) for c in range(0x1F3FB, 0x1F400)]
VS16 = "\ufe0f"
ZWJ = "\u200d"
FAMILY = "👨‍👩‍👧"
HEART_ON_FIRE = "❤️‍🔥"
KEYCAP_1 = "1️⃣"
FRANCE = "🇫🇷"
SCOTLAND = "🏴\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f"

# (comment, keyword, mode, expected)
TABLE = [
    # One emoji, everywhere it stands
    ("🔥", "🔥", W, True),
    ("🔥🔥🔥", "🔥", W, True),
    ("guide🔥", "🔥", W, True),
    ("I want it 🔥 please", "🔥", C, True),
    ("fire", "🔥", C, False),
    ("no emoji here", "🔥", W, False),
    # Several emoji: next to each other (spaces and punctuation aside), in that order
    ("🔥🔥", "🔥🔥", W, True),
    ("🔥 🔥!", "🔥🔥", W, True),
    ("🔥", "🔥🔥", W, False),
    ("🔥 guide 🔥", "🔥🔥", W, False),
    ("🙏🔥", "🔥🙏", C, False),
    ("so 🔥🙏 thanks", "🔥🙏", W, True),
    # Skin tones
    ("👍🏽", "👍", W, True),
    ("👍", "👍🏿", W, True),
    ("👍🏻", "👍🏿", E, True),
    ("🙏🏾🙏🏾", "🙏", C, True),
    # Gender variants (ZWJ + ♀/♂ + VS16), with or without a tone
    ("🏃‍♀️", "🏃", W, True),
    ("🏃‍♂️", "🏃‍♀️", E, True),
    ("🏃🏽‍♀️ go", "🏃‍♂️", W, True),
    ("♀️", "♀️", E, True),  # the sign alone is its own emoji
    ("♀️", "🏃", W, False),
    # Variation selectors
    ("❤", "❤️", E, True),
    ("❤️", "❤", W, True),
    # ZWJ sequences are one unit
    (FAMILY, FAMILY, W, True),
    (FAMILY, "👨", W, False),
    (FAMILY, "👨", C, False),
    ("👨", FAMILY, C, False),
    (HEART_ON_FIRE, "❤️", C, False),
    (HEART_ON_FIRE, "🔥", W, False),
    (HEART_ON_FIRE, HEART_ON_FIRE, E, True),
    # Flags: a pair of regional indicators, or a tag sequence
    (FRANCE, FRANCE, E, True),
    ("🇫🇷🇩🇪", "🇩🇪", W, True),
    ("🇩🇪", FRANCE, C, False),
    (SCOTLAND, SCOTLAND, W, True),
    (SCOTLAND, "🏴", C, False),
    # Keycaps are emoji, not digits
    (KEYCAP_1, KEYCAP_1, E, True),
    (f"pick {KEYCAP_1}", KEYCAP_1, W, True),
    ("1", KEYCAP_1, W, False),
    ("2️⃣", KEYCAP_1, C, False),
    # Exact: the comment is those emoji and nothing else but spaces and punctuation
    ("🔥!", "🔥", E, True),
    ("🔥🔥", "🔥", E, False),
    ("🔥 yes", "🔥", E, False),
    # What a text attaches to an emoji's cluster: an accent is nothing, a letter is a word
    ("🔥\u0301", "🔥", E, True),
    ("🔥\uff9e", "🔥", W, True),
    ("🔥\uff9e", "🔥", E, False),
    ("🔥\uff9e🔥", "🔥🔥", C, False),
    # A keyword with letters is a text keyword: its emoji are ignored, as the comment's
    ("GUIDE", "🔥guide", W, True),
    ("🔥", "🔥guide", W, False),
]


@pytest.mark.parametrize(("text", "keyword", "mode", "expected"), TABLE)
def test_emoji_table(text: str, keyword: str, mode: MatchMode, expected: bool) -> None:
    result = match_keywords(text, [keyword], [], mode)
    assert result.matched is expected, (text, keyword, mode, emoji_units(text))
    if expected:
        assert result.keyword == keyword
        assert result.read_as_digits is None


def test_emoji_keywords_are_matchable_and_what_cannot_match_is_not() -> None:
    for keyword in ("🔥", "🔥🔥", "👍🏽", FAMILY, FRANCE, KEYCAP_1, "🔥!", "© "):
        assert keyword_is_matchable(keyword), keyword
    for keyword in ("!?", "  ", "🏻", VS16, ZWJ, "-", ""):
        assert not keyword_is_matchable(keyword), repr(keyword)


def test_emoji_excluded_keywords() -> None:
    assert match_keywords("guide 👎", ["guide"], ["👎🏼"], W).excluded_by == "👎🏼"
    assert match_keywords("guide 👍", ["guide"], ["👎"], W).matched
    assert match_keywords("🔥 spam", ["🔥"], ["spam"], C).excluded_by == "spam"


def test_a_whole_word_campaign_never_hints_that_an_emoji_is_inside_another() -> None:
    assert inside_a_word(FAMILY, ["👨"]) is None
    assert inside_a_word("recipes 🔥", ["recipe", "🔥"]) == "recipe"


# --- properties -------------------------------------------------------------------------

# Emoji that take skin tones, and people that take a gender sign.
TONED = ["👍", "🙏", "👋", "✌", "🤙", "💪", "👏", "🙌"]
GENDERED = ["🏃", "🤷", "🙋", "💁", "🧘", "🏄"]
PLAIN = ["🔥", "❤", "😍", "🎁", "✨", "💯", FAMILY, HEART_ON_FIRE, FRANCE, KEYCAP_1, SCOTLAND]
EMOJI = st.sampled_from(TONED + GENDERED + PLAIN)
WORDS = st.text(st.characters(categories=["L", "Nd", "Zs", "Po"]), max_size=30)


@st.composite
def variant(draw: st.DrawFn, base: str) -> str:
    """Any way of writing `base` that the matching treats as the same emoji."""
    if base in TONED or base in GENDERED:
        base += draw(st.sampled_from(["", *TONES]))
    if base in GENDERED:
        base += draw(st.sampled_from(["", f"{ZWJ}♀", f"{ZWJ}♂"]))
    return base + draw(st.sampled_from(["", VS16]))


@given(data=st.data(), base=EMOJI, before=WORDS, after=WORDS)
def test_any_variant_of_an_emoji_matches_its_keyword(
    data: st.DataObject, base: str, before: str, after: str
) -> None:
    keyword = data.draw(variant(base))
    written = data.draw(variant(base))
    for mode in (W, C):
        assert match_keywords(f"{before}{written}{after}", [keyword], [], mode).matched
    assert match_keywords(f" {written}!", [keyword], [], E).matched


@given(base=EMOJI, other=EMOJI, words=WORDS)
def test_a_different_emoji_never_matches(base: str, other: str, words: str) -> None:
    if base == other:
        return
    for mode in KEYWORD_MODES:
        assert not match_keywords(f"{words}{other}{words}", [base], [], mode).matched


@given(keyword=st.text(min_size=1, max_size=20), comment=WORDS, emoji=st.lists(EMOJI, max_size=4))
def test_text_keywords_ignore_emoji_in_the_comment(
    keyword: str, comment: str, emoji: list[str]
) -> None:
    if emoji_keyword_key(keyword) is not None:
        return
    decorated = f"{''.join(emoji)} {comment} {''.join(reversed(emoji))}"
    for mode in KEYWORD_MODES:
        assert (
            match_keywords(comment, [keyword], [], mode).matched
            == match_keywords(decorated, [keyword], [], mode).matched
        )


@given(keyword=st.lists(EMOJI, min_size=1, max_size=3), comment=st.lists(EMOJI | WORDS))
def test_emoji_keywords_match_alike_in_whole_word_and_contains(
    keyword: list[str], comment: list[str]
) -> None:
    text, kw = "".join(comment), "".join(keyword)
    assert match_keywords(text, [kw], [], W).matched == match_keywords(text, [kw], [], C).matched


# --- through the campaign choice and the DM trigger --------------------------------------

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def rule(id_: int, keywords: tuple[str, ...], *, dm: bool = False) -> CampaignRule:
    return CampaignRule(
        id=id_,
        name=f"c{id_}",
        status=CampaignStatus.ACTIVE,
        scope=CampaignScope.ANY_POST,
        media_id=None,
        keywords=keywords,
        excluded_keywords=(),
        match_mode=W,
        priority=0,
        created_at=T0,
        dm_trigger=dm,
    )


def test_emoji_keywords_choose_a_campaign_and_fire_a_dm_trigger() -> None:
    rules = [rule(1, ("guide",)), rule(2, ("🔥",), dm=True)]
    decision = choose_campaign(rules, CommentFacts(text="🔥🔥"))
    assert decision.campaign_id == 2
    assert decision.matched_keyword == "🔥"
    assert choose_campaign(rules, CommentFacts(text="guide 🔥")).campaign_id == 1

    dm = choose_dm_campaign(rules, "🔥🔥 pls")
    assert dm is not None
    assert dm.campaign.id == 2
    assert dm.keyword == "🔥"
    assert choose_dm_campaign(rules, "fire pls") is None


def test_a_story_reply_of_emoji_answers_an_emoji_keyword() -> None:
    rules = [
        StoryRule(rule(1, ("loaf",)), CampaignTrigger.STORY_REPLIES),
        StoryRule(rule(2, ("😍",)), CampaignTrigger.STORY_REPLIES),
    ]
    match = choose_story_reply_campaign(rules, story_id="1790", text="😍😍😍", sent_at=T0)
    assert match is not None
    assert (match.campaign.id, match.keyword) == (2, "😍")
    assert choose_story_reply_campaign(rules, story_id="1790", text="🔥", sent_at=T0) is None


# Any text: letters, marks, emoji pieces (joiners, selectors, tones, tags, regional
# indicators, keycap marks) in any order, including ones no keyboard would produce.
PIECES = st.sampled_from(
    [ZWJ, VS16, "\ufe0e", "\u20e3", "\U000e0067", "\U000e007f", "🇫", "🇷", *TONES, "♀", "♂"]
)
ANY_TEXT = st.lists(st.text(max_size=6) | PIECES | EMOJI, max_size=12).map("".join)


@given(text=ANY_TEXT, keyword=ANY_TEXT, excluded=ANY_TEXT)
def test_any_text_and_keyword_get_an_answer(text: str, keyword: str, excluded: str) -> None:
    for mode in MatchMode:
        result = match_keywords(text, [keyword], [excluded], mode)
        assert result.matched in (True, False)
        if result.matched and mode is not MatchMode.ANY_COMMENT:
            assert result.keyword == keyword
    # An emoji keyword's units never include a letter run, and a keyword that is not
    # matchable never matches anything.
    key = emoji_keyword_key(keyword)
    assert key is None or "\x00\x00" not in key
    if not keyword_is_matchable(keyword):
        assert not match_keywords(text, [keyword], [], W).matched


@given(keyword=ANY_TEXT)
def test_a_matchable_keyword_matches_itself_in_every_mode(keyword: str) -> None:
    if not keyword_is_matchable(keyword):
        return
    for mode in KEYWORD_MODES:
        assert match_keywords(keyword, [keyword], [], mode).matched, mode


def test_an_emoji_joined_into_another_is_named_for_the_creator() -> None:
    assert inside_an_emoji(FAMILY, ["guide", "👨"]) == ("👨", FAMILY)
    assert inside_an_emoji(f"so {HEART_ON_FIRE}", ["🔥"]) == ("🔥", HEART_ON_FIRE)
    assert inside_an_emoji("👩🏽‍🚀", ["🚀"]) == ("🚀", "👩🏽‍🚀")
    # A gender variant is the same emoji, not a part of another; plain text has no parts.
    assert inside_an_emoji("🏃‍♀️", ["🏃"]) is None
    assert inside_an_emoji("🔥", ["🔥"]) is None
    assert inside_an_emoji("fire", ["🔥"]) is None
    assert inside_an_emoji(FAMILY, ["👨👩"]) is None  # several emoji: no single part
