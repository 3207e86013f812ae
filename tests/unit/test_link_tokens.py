"""Tracked-link tokens, UTM tags and the preview/click split (pure)."""

from __future__ import annotations

import pytest

from app.clicks.links import LinkTracker, with_utm
from app.clicks.tokens import LinkTarget, link_key, make_token, read_token
from app.clicks.visitors import Visit, classify

KEY = link_key("a-secret-key-of-at-least-32-characters!!")
PHONE = b"Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) Mobile/15E148 Instagram 321.0"


@pytest.mark.parametrize(
    ("dm_log_id", "button", "path"),
    [
        (0, 0, ""),
        (1, 15, "a?b=c&d=%20#frag"),
        (127, 2, "ünïcödé/🍋"),
        (128, 1, "x" * 2000),
        (2**62, 0, "path/with spaces\tand\nbreaks"),
    ],
)
def test_a_token_carries_its_target(dm_log_id: int, button: int, path: str) -> None:
    target = LinkTarget(dm_log_id, button, "https://sunny.example/" + path)
    assert read_token(KEY, make_token(KEY, target)) == target


def test_any_change_to_a_token_is_refused() -> None:
    token = make_token(KEY, LinkTarget(42, 1, "https://sunny.example/lemon"))
    for at in range(len(token)):
        for swap in "Ab0_-":
            if token[at] != swap:
                changed = token[:at] + swap + token[at + 1 :]
                assert read_token(KEY, changed) is None or changed == token
    assert read_token(KEY, token[:-1]) is None
    assert read_token(link_key("another-secret-key-of-32-characters-xx"), token) is None
    assert read_token(KEY, "") is None
    assert read_token(KEY, "x" * 10_000) is None


def test_tracker_is_deterministic_and_leaves_other_schemes_alone() -> None:
    tracker = LinkTracker("https://once.example", KEY, 7)
    first = tracker.track(0, "https://sunny.example/lemon")
    assert first == tracker.track(0, "https://sunny.example/lemon")
    assert first.startswith("https://once.example/go/")
    assert first != tracker.track(1, "https://sunny.example/lemon")
    assert tracker.track(0, "mailto:sunny@example.com") == "mailto:sunny@example.com"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (
            "https://a.example/p",
            "https://a.example/p?utm_source=instagram&utm_medium=dm&utm_campaign=Lemon+loaf",
        ),
        (
            "https://a.example/p?x=1&utm_medium=story#top",
            "https://a.example/p?x=1&utm_medium=story&utm_source=instagram&utm_campaign=Lemon+loaf#top",
        ),
        (
            "https://a.example/?utm_source=a&utm_medium=b&utm_campaign=c",
            "https://a.example/?utm_source=a&utm_medium=b&utm_campaign=c",
        ),
    ],
)
def test_utm_tags_keep_the_creators_own(url: str, expected: str) -> None:
    assert with_utm(url, "Lemon loaf") == expected


@pytest.mark.parametrize(
    ("method", "headers", "visit"),
    [
        ("GET", {b"user-agent": PHONE}, Visit.CLICK),
        ("HEAD", {b"user-agent": PHONE}, Visit.PREVIEW),
        ("GET", {b"user-agent": b"facebookexternalhit/1.1"}, Visit.PREVIEW),
        ("GET", {b"user-agent": b"meta-externalagent/1.1"}, Visit.PREVIEW),
        ("GET", {b"user-agent": b"WhatsApp/2.23.20.0"}, Visit.PREVIEW),
        ("GET", {b"user-agent": b"Mozilla/5.0 (compatible; Googlebot/2.1)"}, Visit.PREVIEW),
        ("GET", {}, Visit.PREVIEW),
        ("GET", {b"user-agent": PHONE, b"sec-purpose": b"prefetch;prerender"}, Visit.PREVIEW),
        ("GET", {b"user-agent": PHONE, b"purpose": b"prefetch"}, Visit.PREVIEW),
        ("GET", {b"user-agent": PHONE, b"x-purpose": b"preview"}, Visit.PREVIEW),
    ],
)
def test_people_and_fetchers(method: str, headers: dict[bytes, bytes], visit: Visit) -> None:
    assert classify(method, headers) is visit
