"""Forgiving numeric codes: look-alike letters read as digits, whole words stay whole, and the
decision says when it happened."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.campaigns.dm_matching import choose_dm_campaign
from app.campaigns.matching import (
    CampaignRule,
    CommentFacts,
    Verdict,
    choose_campaign,
    match_keywords,
    read_from,
)
from app.campaigns.numeric_codes import read_as_numbers
from app.campaigns.story_matching import StoryRule, choose_story_reply_campaign
from app.db.models import CampaignScope, CampaignStatus, CampaignTrigger, MatchMode

W, C, E = MatchMode.WHOLE_WORD, MatchMode.CONTAINS, MatchMode.EXACT

# (comment, code, mode, the word read as the code, or None for no match)
TABLE: list[tuple[str, str, MatchMode, str | None]] = [
    ("2O24", "2024", W, "2O24"),
    ("code 2o24 please!", "2024", W, "2o24"),
    ("20I5", "2015", W, "20I5"),
    ("l0l", "101", W, "l0l"),
    ("ＩＯ５", "105", W, "IO5"),  # full-width: the word as typed, once normalized
    ("2O24", "2024", E, "2O24"),
    ("2O24!!", "2024", E, "2O24"),
    ("2O24 pls", "2024", E, None),
    ("2O245", "024", C, "2O245"),
    # Longer numbers stay longer: the whole word is read, never a part of it
    ("12O24", "2024", W, None),
    ("2O245", "2024", W, None),
    ("2O245", "2024", E, None),
    # Words of letters only are never numbers
    ("OOO", "000", W, None),
    ("lol", "101", W, None),
    ("Io", "10", W, None),
    # Other letters in the word: it is a word, not a number
    ("2O24x", "2024", W, None),
    ("x2O24", "2024", C, None),
    ("too1", "01", C, None),
    # Letters left out of the set on purpose
    ("2S24", "2524", W, None),
    ("8B", "88", W, None),
    ("1i", "11", W, None),  # small i is not a stroke
    ("1L", "11", W, None),  # capital L is not a stroke
    ("2О24", "2024", W, None),  # Cyrillic О
]


@pytest.mark.parametrize(("text", "code", "mode", "read"), TABLE)
def test_numeric_code_table(text: str, code: str, mode: MatchMode, read: str | None) -> None:
    result = match_keywords(text, [code], [], mode)
    assert result.matched is (read is not None), (text, code, mode)
    assert result.read_as_digits == read
    if read is not None:
        assert result.keyword == code


def test_only_keywords_made_of_digits_forgive() -> None:
    assert not match_keywords("linkO", ["link0"], [], W).matched
    assert not match_keywords("2O24", ["code 2024"], [], W).matched
    assert match_keywords("2O24 pls", ["2024", "pls"], [], W).keyword == "pls"


def test_a_keyword_as_typed_wins_over_a_reading() -> None:
    result = match_keywords("2O24 or 1999", ["2024", "1999"], [], W)
    assert (result.keyword, result.read_as_digits) == ("1999", None)
    typed = match_keywords("2024", ["2024"], [], W)
    assert typed.matched
    assert typed.read_as_digits is None


def test_excluded_keywords_are_never_read_from_look_alikes() -> None:
    assert match_keywords("guide 2O24", ["guide"], ["2024"], W).matched
    assert match_keywords("guide 2024", ["guide"], ["2024"], W).excluded_by == "2024"


# --- properties -------------------------------------------------------------------------

CODES = st.from_regex(r"[0-9]{1,8}", fullmatch=True)
LOOK_ALIKE = {"0": "Oo", "1": "Il"}


@st.composite
def typed_with_look_alikes(draw: st.DrawFn, code: str) -> str | None:
    """`code` with some of its 0s and 1s typed as look-alike letters, at least one real digit
    left; None when that cannot be (no 0 or 1, or a code of only 0s and 1s of length 1)."""
    swappable = [i for i, digit in enumerate(code) if digit in LOOK_ALIKE]
    if not swappable or len(code) < 2:
        return None
    chosen = draw(st.sets(st.sampled_from(swappable), min_size=1, max_size=len(code) - 1))
    return "".join(
        draw(st.sampled_from(LOOK_ALIKE[digit])) if i in chosen else digit
        for i, digit in enumerate(code)
    )


@given(data=st.data(), code=CODES)
def test_a_code_typed_with_look_alikes_matches_and_says_so(data: st.DataObject, code: str) -> None:
    typed = data.draw(typed_with_look_alikes(code))
    if typed is None:
        return
    for mode in (W, C, E):
        result = match_keywords(f"{typed}!", [code], [], mode)
        assert (result.keyword, result.read_as_digits) == (code, typed), mode
    assert match_keywords(f"the code {typed} please", [code], [], W).read_as_digits == typed


@given(data=st.data(), code=CODES, extra=st.from_regex(r"[0-9Ol]{1,3}", fullmatch=True))
def test_a_longer_number_never_matches_whole_word(
    data: st.DataObject, code: str, extra: str
) -> None:
    typed = data.draw(typed_with_look_alikes(code)) or code
    for longer in (f"{extra}{typed}", f"{typed}{extra}"):
        assert not match_keywords(longer, [code], [], W).matched, longer
        assert not match_keywords(longer, [code], [], E).matched, longer


@given(word=st.text(st.sampled_from("OoIl"), min_size=1, max_size=8), code=CODES)
def test_look_alike_letters_alone_are_never_a_number(word: str, code: str) -> None:
    assert read_as_numbers([word]) == []
    for mode in (W, C, E):
        assert not match_keywords(word, [code], [], mode).matched


@given(text=st.text(max_size=40), code=CODES)
def test_what_matches_as_typed_never_carries_a_note(text: str, code: str) -> None:
    typed = match_keywords(text, [code], [], W)
    if code in text.split():
        assert typed.matched
        assert typed.read_as_digits is None


# --- the decision records it ------------------------------------------------------------

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def rule(id_: int, keywords: tuple[str, ...], *, priority: int = 0) -> CampaignRule:
    return CampaignRule(
        id=id_,
        name=f"c{id_}",
        status=CampaignStatus.ACTIVE,
        scope=CampaignScope.ANY_POST,
        media_id=None,
        keywords=keywords,
        excluded_keywords=(),
        match_mode=W,
        priority=priority,
        created_at=T0,
        dm_trigger=True,
    )


def test_the_decision_and_its_record_say_a_code_was_read() -> None:
    rules = [rule(1, ("2024",), priority=5), rule(2, ("1O1", "101"))]
    decision = choose_campaign(rules, CommentFacts(text="2O24 and l0l"))
    assert decision.campaign_id == 1
    assert decision.matched_keyword == "2024"
    assert decision.read_as_digits == "2O24"
    stored = decision.to_json()
    assert stored["read_as_digits"] == "2O24"
    assert stored["considered"] == [
        {"campaign_id": 1, "name": "c1", "verdict": "won", "keyword": "2024",
         "read_as_digits": "2O24"},
        {"campaign_id": 2, "name": "c2", "verdict": "lost", "keyword": "101", "lost_to": "c1",
         "read_as_digits": "l0l"},
    ]  # fmt: skip
    assert decision.considered[1].verdict is Verdict.LOST

    plain = choose_campaign(rules, CommentFacts(text="2024"))
    assert plain.read_as_digits is None
    assert "read_as_digits" not in plain.to_json()
    assert "read_as_digits" not in plain.to_json()["considered"][0]


def test_a_dm_trigger_reads_codes_too() -> None:
    match = choose_dm_campaign([rule(1, ("2024",))], "code 2O24?")
    assert match is not None
    assert (match.keyword, match.read_as_digits) == ("2024", "2O24")


def test_a_story_reply_reads_codes_too() -> None:
    story = StoryRule(rule(1, ("2024",)), CampaignTrigger.STORY_REPLIES)
    match = choose_story_reply_campaign([story], story_id="1790", text="2O24!", sent_at=T0)
    assert match is not None
    assert (match.keyword, match.read_as_digits) == ("2024", "2O24")


def test_read_from_names_the_word_only_when_the_code_was_read() -> None:
    assert read_from("code 2O24 pls", "2024") == "2O24"
    assert read_from("code 2024 and 2O24", "2024") is None  # typed as is
    assert read_from("code 12O245", "024") == "12O245"
    assert read_from("recipe", "recipe") is None
    assert read_from("🔥", "🔥") is None
    assert read_from("lol", "101") is None
