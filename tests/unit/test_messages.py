"""Rendering private replies within Meta's limits, never splitting a visible character."""

from __future__ import annotations

import pytest

from app.campaigns.message_format import (
    LinkButton,
    build_message,
    buttons_of,
    cut_bytes,
    cut_chars,
    graphemes,
    render,
    text_message,
)
from app.delivery.send.outcomes import retry_delay


def test_placeholders() -> None:
    assert (
        render("Hi {username}: {link}", username="@jane", link="https://x") == "Hi jane: https://x"
    )
    assert render("Hi {username}", username=None, link=None) == "Hi there"
    assert render("Hi {username} {other}", username="", link=None) == "Hi there {other}"


def test_text_message_puts_the_links_inline() -> None:
    buttons = [LinkButton("Recipe", "https://a.example"), LinkButton("Shop", "https://b.example")]
    message = text_message("Here: {link} enjoy", buttons, username="jane")
    assert message.body == {"text": "Here: https://a.example enjoy\nhttps://b.example"}
    appended = text_message("Enjoy {username}", buttons[:1], username="jane")
    assert appended.text == "Enjoy jane\nhttps://a.example"
    assert text_message("Hello!", [], username="x").body == {"text": "Hello!"}


def test_button_template_within_limits() -> None:
    buttons = buttons_of(
        [
            {"title": "A very long button title indeed", "url": "https://a.example"},
            {"title": "", "url": "https://b.example"},
            {"title": "x", "url": ""},
            {"title": "3", "url": "https://c.example"},
            {"title": "4", "url": "https://d.example"},
        ]
    )
    assert len(buttons) == 3
    message = build_message("Tap below, {username}: {link}" + "x" * 700, buttons, username="jo")
    payload = message.body["attachment"]["payload"]
    assert payload["template_type"] == "button"
    assert len(payload["text"]) <= 640
    assert payload["text"].startswith("Tap below, jo:")
    assert [b["title"] for b in payload["buttons"]] == ["A very long button t", "Open link", "3"]
    assert all(len(b["title"]) <= 20 for b in payload["buttons"])
    only_link = build_message("{link}", buttons, username=None)
    assert only_link.text == "Here's your link:"


def test_text_is_cut_to_1000_bytes_on_a_grapheme_boundary() -> None:
    text = "é" * 600  # 2 bytes each
    message = text_message(text, [], username=None)
    assert len(message.text.encode()) <= 1000
    family = "👨\u200d👩\u200d👧"
    cut = cut_bytes("a" * 995 + family, 1000)
    assert cut == "a" * 995


@pytest.mark.parametrize(
    ("text", "clusters"),
    [
        ("abc", ["a", "b", "c"]),
        ("e\u0301x", ["e\u0301", "x"]),
        ("👍🏽!", ["👍🏽", "!"]),
        ("🇫🇷🇩🇪", ["🇫🇷", "🇩🇪"]),
        ("👨\u200d👩\u200d👧x", ["👨\u200d👩\u200d👧", "x"]),
        ("❤\ufe0f", ["❤\ufe0f"]),
        ("\r\nx", ["\r\n", "x"]),
        ("\u1100\u1161\u11a8", ["\u1100\u1161\u11a8"]),
        ("Привет", list("Привет")),
        ("1\ufe0f\u20e3#\ufe0f\u20e3", ["1\ufe0f\u20e3", "#\ufe0f\u20e3"]),  # keycaps
        # A vowel sign that spaces (Thai SARA AM after a tone mark): "water".
        ("น้ำ", ["น้ำ"]),
        # Indic conjuncts: consonant, virama, consonant are one character.
        ("क्षत्रिय", ["क्ष", "त्रि", "य"]),
        ("ক্ষ", ["ক্ষ"]),
        # A Hangul LV syllable takes a following vowel jamo.
        ("\uac00\u1161", ["\uac00\u1161"]),
        # ZWJ joins pictographs only; a control (line break) stands alone.
        ("a\u200db", ["a\u200d", "b"]),
        ("\n\u0301", ["\n", "\u0301"]),
    ],
)
def test_graphemes(text: str, clusters: list[str]) -> None:
    assert list(graphemes(text)) == clusters


def test_titles_are_cut_on_grapheme_boundaries() -> None:
    title = "Get it now " + "👍🏽" * 10
    cut = cut_chars(title, 20)
    assert len(cut) <= 20
    assert not cut.endswith("👍")  # the skin tone is never cut off its emoji
    assert cut_chars("short", 20) == "short"


def test_cuts_keep_conjuncts_and_vowel_signs_whole() -> None:
    # 19 code points, then a conjunct of 3: 21 would hold its first two, never half of it.
    assert cut_chars("Namaste friends ok " + "क्ष", 21) == "Namaste friends ok"
    # "น้ำ" is 3 code points of 3 bytes each: 994 + 6 bytes would end on its tone mark.
    assert cut_bytes("a" * 994 + "น้ำ", 1000) == "a" * 994


def test_retry_delays_start_anew_with_a_manual_budget() -> None:
    # Only the attempts before a budget's last one are ever followed by a retry.
    assert [retry_delay(n, 3).total_seconds() / 60 for n in (1, 2)] == [5, 15]
    assert [retry_delay(n, 6).total_seconds() / 60 for n in (4, 5)] == [5, 15]
