"""Campaign editor rules against Meta's limits (bytes vs characters, emoji, placeholders), and
the other pure pieces of the dashboard: callback checks, throttle schedule, safe redirects,
account card wording, token answers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from litestar.datastructures import FormMultiDict

from app.accounts.cards import AccountCard
from app.accounts.connect import ConnectProblem, PendingConnect, check_callback
from app.auth.current import safe_next
from app.auth.throttle import ThrottlePolicy
from app.campaigns.message_format import LinkButton
from app.campaigns.validation import (
    CampaignInput,
    activation_problems,
    check_campaign,
    check_dm_text,
    input_from_values,
    parse_campaign_form,
    split_keywords,
)
from app.db.models import AccountStatus, CampaignScope, CampaignTrigger, MatchMode
from app.instagram.oauth import OAuthExchangeError, _parse_token, clean_code


def _input(**changes: Any) -> CampaignInput:
    values: dict[str, Any] = {
        "name": "Lemon loaf",
        "account_id": "1",
        "scope": "any_post",
        "keywords": ["RECIPE"],
        "dm_text": "Hi!",
    }
    values.update(changes)
    return CampaignInput(**values)


def _buttons(*titles: str) -> list[LinkButton]:
    rows = [LinkButton(title, "https://example.com/x") for title in titles]
    return rows + [LinkButton("", "")] * (3 - len(rows))


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("a" * 1000, True),
        ("a" * 1001, False),
        ("é" * 500, True),  # 2 bytes each: exactly 1000
        ("é" * 501, False),
        ("🍋" * 250, True),  # 4 bytes each
        ("🍋" * 251, False),
        ("👍🏽" * 125, True),  # thumb + skin tone: 8 bytes
        ("👍🏽" * 126, False),
        ("x" * 970 + "{username}", True),  # {username} counts as 30
        ("x" * 971 + "{username}", False),
    ],
)
def test_plain_text_is_limited_to_1000_bytes(text: str, ok: bool) -> None:
    assert (check_dm_text(_input(dm_text=text)) is None) is ok


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("a" * 640, True),
        ("a" * 641, False),
        ("🍋" * 640, True),  # characters, not bytes, with buttons
        ("🍋" * 641, False),
        ("a" * 640 + "{link}", True),  # {link} leaves a template's text
        ("a" * 610 + "{username}", True),
        ("a" * 611 + "{username}", False),
    ],
)
def test_with_buttons_the_text_is_limited_to_640_characters(text: str, ok: bool) -> None:
    assert (check_dm_text(_input(dm_text=text, buttons=_buttons("Go"))) is None) is ok


def test_placeholders_are_checked() -> None:
    assert "{name}" in (check_dm_text(_input(dm_text="Hi {name}")) or "")
    assert "needs a link" in (check_dm_text(_input(dm_text="Get it: {link}")) or "")
    assert check_dm_text(_input(dm_text="Get it: {link}", buttons=_buttons("Go"))) is None
    assert check_dm_text(_input(dm_text="Hi {username}, a {curly} brace")) is not None
    assert check_dm_text(_input(dm_text="JSON like {} stays")) is None


@pytest.mark.parametrize(
    ("title", "url", "problem"),
    [
        ("A" * 20, "https://example.com", None),
        ("🍋" * 20, "https://example.com", None),
        ("A" * 21, "https://example.com", "at most 20"),
        ("", "https://example.com", "title"),
        ("Go", "", "Add the link"),
        ("Go", "http://example.com", "https://"),
        ("Go", "https://", "https://"),
        ("Go", "javascript:alert(1)", "https://"),
        ("Go", "https://example.com/" + "x" * 2000, "2000"),
    ],
)
def test_buttons(title: str, url: str, problem: str | None) -> None:
    errors = check_campaign(
        _input(buttons=[LinkButton(title, url), LinkButton("", ""), LinkButton("", "")]),
        require_complete=False,
    )
    if problem is None:
        assert "button_1" not in errors
    else:
        assert problem in errors["button_1"]


def test_keywords_are_split_deduplicated_and_limited() -> None:
    assert split_keywords(["RECIPE", "recipe, Guide ,  free   pdf", "", ",,"]) == [
        "RECIPE",
        "Guide",
        "free pdf",
    ]
    assert "keywords" not in check_campaign(
        _input(keywords=[f"k{i}" for i in range(10)]), require_complete=False
    )
    assert (
        "At most 10"
        in check_campaign(_input(keywords=[f"k{i}" for i in range(11)]), require_complete=False)[
            "keywords"
        ]
    )
    assert "keywords" not in check_campaign(_input(keywords=["é" * 50]), require_complete=False)
    assert "50" in check_campaign(_input(keywords=["é" * 51]), require_complete=False)["keywords"]
    for emoji in ("🍪🍪", "👍🏽", "👨‍👩‍👧", "1️⃣"):
        assert "keywords" not in check_campaign(_input(keywords=[emoji]), require_complete=False)
        assert "excluded_keywords" not in check_campaign(
            _input(excluded_keywords=[emoji]), require_complete=False
        )
    for nothing in ("?!", "🏻", "--"):
        assert (
            check_campaign(_input(keywords=["guide", nothing]), require_complete=False)["keywords"]
            == f"“{nothing}” has no letters, digits or emoji, so no comment can ever match it."
        )
        assert (
            "no letters, digits or emoji"
            in (
                check_campaign(_input(excluded_keywords=[nothing]), require_complete=False)[
                    "excluded_keywords"
                ]
            )
        )
    assert (
        "excluded"
        in check_campaign(
            _input(excluded_keywords=[f"x{i}" for i in range(11)]), require_complete=False
        )["excluded_keywords"]
    )


@pytest.mark.parametrize(
    ("priority", "ok"),
    [
        ("-1000", True),
        ("1000", True),
        ("1001", False),
        ("-1001", False),
        ("1.5", False),
        ("ten", False),
    ],
)
def test_priority(priority: str, ok: bool) -> None:
    assert (
        "priority" not in check_campaign(_input(priority=priority), require_complete=False)
    ) is ok


def test_public_replies_one_per_line_up_to_ten() -> None:
    ten = _input(public_replies_text="\n".join(f"Thanks {i}!" for i in range(10)) + "\n\n")
    assert len(ten.public_replies) == 10
    assert "public_replies" not in check_campaign(ten, require_complete=False)
    eleven = _input(public_replies_text="\n".join(f"r{i}" for i in range(11)))
    assert "At most 10" in check_campaign(eleven, require_complete=False)["public_replies"]


def test_activation_needs_scope_keywords_and_text() -> None:
    draft = _input(scope="post", media_id="", keywords=[], dm_text="  ")
    assert set(activation_problems(draft)) == {"media_id", "keywords", "dm_text"}
    assert check_campaign(draft, require_complete=False) == {}
    assert set(check_campaign(draft, require_complete=True)) == {"media_id", "keywords", "dm_text"}
    any_comment = _input(match_mode="any_comment", keywords=[])
    assert activation_problems(any_comment) == {}
    assert activation_problems(_input(scope="next_post")) == {}


def test_the_form_is_read_as_typed_and_round_trips_through_the_columns() -> None:
    form = FormMultiDict(
        [
            ("name", "  Lemon   loaf "),
            ("account_id", "7"),
            ("scope", "post"),
            ("media_id", "17918195224117851"),
            ("media_caption_17918195224117851", "Lemon 🍋"),
            ("media_caption_17918195224117852", "another post"),
            ("match_mode", "contains"),
            ("keywords", "RECIPE"),
            ("keywords_entry", "guide, recipe"),
            ("dm_text", "Hi {username}!\r\nLine two  \r\n"),
            ("button_title_1", " Get it "),
            ("button_url_1", "https://example.com/r"),
            ("public_replies", "Sent!\r\nCheck DMs"),
            ("priority", "-3"),
        ]
    )
    parsed = parse_campaign_form(form)
    assert parsed.name == "Lemon loaf"
    assert parsed.media_caption == "Lemon 🍋"
    assert parsed.keywords == ["RECIPE", "guide"]
    assert parsed.dm_text == "Hi {username}!\nLine two"
    assert parsed.once_per_person is False  # an unticked checkbox is absent
    assert check_campaign(parsed, require_complete=True) == {}
    columns = parsed.column_values()
    assert columns["scope"] is CampaignScope.POST
    assert columns["match_mode"] is MatchMode.CONTAINS
    assert columns["buttons"] == [{"title": "Get it", "url": "https://example.com/r"}]
    assert columns["public_replies"] == ["Sent!", "Check DMs"]
    assert columns["public_reply_enabled"] is True
    again = input_from_values(columns)
    assert again.column_values() == columns
    assert _input(scope="any_post", media_id="123").column_values()["media_id"] is None


def _pending(**changes: Any) -> PendingConnect:
    values: dict[str, Any] = {
        "state": "s" * 43,
        "verifier": "v" * 64,
        "workspace_id": 1,
        "user_id": 2,
        "started_at": 1_000.0,
    }
    values.update(changes)
    return PendingConnect(**values)


@pytest.mark.parametrize(
    ("pending", "params", "now", "problem"),
    [
        (_pending(), {"code": "c", "state": "s" * 43}, 1_100.0, None),
        (_pending(), {"error": "access_denied", "state": "s" * 43}, 1_100.0, ConnectProblem.DENIED),
        (_pending(), {"error": "server_error"}, 1_100.0, ConnectProblem.REFUSED),
        (None, {"code": "c", "state": "s" * 43}, 1_100.0, ConnectProblem.STATE),
        (_pending(), {"code": "c", "state": "t" * 43}, 1_100.0, ConnectProblem.STATE),
        (_pending(), {"code": "c"}, 1_100.0, ConnectProblem.STATE),
        (_pending(), {"state": "s" * 43}, 1_100.0, ConnectProblem.STATE),
        (_pending(workspace_id=9), {"code": "c", "state": "s" * 43}, 1_100.0, ConnectProblem.STATE),
        (_pending(), {"code": "c", "state": "s" * 43}, 1_601.0, ConnectProblem.EXPIRED),
    ],
)
def test_callback_checks(
    pending: PendingConnect | None,
    params: dict[str, str],
    now: float,
    problem: ConnectProblem | None,
) -> None:
    assert check_callback(pending, params, workspace_id=1, user_id=2, now=now) is problem


def test_pending_connect_survives_the_session_and_rejects_junk() -> None:
    pending = _pending()
    assert PendingConnect.from_session(pending.to_session()) == pending
    assert PendingConnect.from_session({"state": "x"}) is None
    assert PendingConnect.from_session("nope") is None


def test_throttle_schedule() -> None:
    policy = ThrottlePolicy(free_failures=3, base_delay_s=0.25, max_delay_s=2.0)
    assert [policy.delay_for(n) for n in range(1, 10)] == [0, 0, 0, 0.25, 0.5, 1.0, 2.0, 2.0, 2.0]
    # One address trying many emails is slowed later, and never locked out.
    assert policy.delay_for(20, free=20) == 0
    assert policy.delay_for(22, free=20) == 0.5


@pytest.mark.parametrize(
    ("target", "safe"),
    [
        ("/campaigns?x=1", "/campaigns?x=1"),
        ("//evil.example", "/"),
        ("/\\evil.example", "/"),
        ("https://evil.example", "/"),
        ("", "/"),
        (None, "/"),
    ],
)
def test_safe_next(target: str | None, safe: str) -> None:
    assert safe_next(target) == safe


def _card(
    expires_in: timedelta | None, status: AccountStatus = AccountStatus.ACTIVE
) -> AccountCard:
    now = datetime.now(UTC)
    return AccountCard(
        id=1,
        ig_user_id="1",
        username="u",
        name=None,
        account_type=None,
        status=status,
        status_reason=None,
        paused_until=None,
        token_expires_at=None if expires_in is None else now + expires_in,
        webhook_subscribed_at=None,
        webhook_fields=[],
        connected_at=now,
        active_campaigns=0,
        campaigns=0,
    )


def test_account_card_wording() -> None:
    assert _card(timedelta(days=59, hours=23)).token_countdown() == "expires in 59 days"
    assert _card(timedelta(days=1, hours=5, minutes=1)).token_countdown() == "expires in 1 day 5 h"
    assert _card(timedelta(hours=3, minutes=1)).token_countdown() == "expires in 3 h"
    card = _card(timedelta(minutes=30))
    assert card.token_expires_at is not None
    assert (
        card.token_countdown(card.token_expires_at - timedelta(minutes=30)) == "expires in 30 min"
    )
    assert _card(timedelta(days=5)).token_state() == "soon"
    assert _card(timedelta(days=30)).token_state() == "ok"
    expired = _card(timedelta(seconds=-1))
    assert (expired.token_countdown(), expired.effective_status()) == ("expired", "needs_reauth")
    assert _card(None, AccountStatus.DISCONNECTED).effective_status() == "disconnected"


def test_token_answers_in_both_shapes_and_the_legacy_error() -> None:
    flat = _parse_token({"access_token": "IGAA1", "user_id": 27640875392278831})
    assert (flat.access_token, flat.user_id) == ("IGAA1", "27640875392278831")
    wrapped = _parse_token({"data": [{"access_token": "IGAA2", "user_id": "5"}]})
    assert wrapped.access_token == "IGAA2"
    with pytest.raises(OAuthExchangeError, match="Matching code was not found"):
        _parse_token(
            {
                "error_type": "OAuthException",
                "code": 400,
                "error_message": "Matching code was not found",
            }
        )
    assert clean_code("AQBx-hBsH3#_") == "AQBx-hBsH3"


def test_a_request_with_more_buttons_than_instagram_shows_is_refused_not_cut() -> None:
    rows = [
        item
        for i in range(1, 6)
        for item in ((f"button_title_{i}", f"Link {i}"), (f"button_url_{i}", f"https://e.x/{i}"))
    ]
    base = [("name", "Five"), ("account_id", "7"), ("scope", "any_post"), ("keywords", "GUIDE")]
    form = FormMultiDict([*base, ("dm_text", "Here you go"), *rows])
    errors = check_campaign(parse_campaign_form(form), require_complete=True)
    assert errors["buttons"].startswith("At most 3 buttons")
    assert "had 5" in errors["buttons"]


def test_the_public_reply_waits_for_the_dm_unless_the_campaign_says_otherwise() -> None:
    base = [("name", "R"), ("account_id", "7"), ("scope", "any_post"), ("keywords", "GUIDE")]
    waits = parse_campaign_form(FormMultiDict([*base, ("public_replies", "Sent you a DM!")]))
    assert waits.column_values()["public_reply_after_dm"] is True
    always = parse_campaign_form(
        FormMultiDict([*base, ("public_replies", "Thanks!"), ("public_reply_always", "on")])
    )
    assert always.column_values()["public_reply_after_dm"] is False
    assert input_from_values(always.column_values()).public_reply_always is True


def test_the_public_reply_is_skipped_in_a_backlog_only_when_the_campaign_says_so() -> None:
    base = [("name", "R"), ("account_id", "7"), ("scope", "any_post"), ("keywords", "GUIDE")]
    posts = parse_campaign_form(FormMultiDict([*base, ("public_replies", "Thanks!")]))
    assert posts.column_values()["public_reply_skip_in_backlog"] is False
    skips = parse_campaign_form(
        FormMultiDict(
            [*base, ("public_replies", "Thanks!"), ("public_reply_skip_in_backlog", "on")]
        )
    )
    assert skips.column_values()["public_reply_skip_in_backlog"] is True
    assert input_from_values(skips.column_values()).public_reply_skip_in_backlog is True


def test_a_story_reply_campaign_reads_its_story_and_needs_no_post() -> None:
    form = FormMultiDict(
        [
            ("name", "Story loaf"),
            ("account_id", "7"),
            ("trigger", "story_replies"),
            ("story_scope", "one_story"),
            ("story_id", "17900000000000001"),
            ("story_time_17900000000000001", "2026-12-02T08:00:00+0000"),
            ("story_time_17900000000000002", "2026-12-02T09:00:00+0000"),
            ("scope", "post"),  # the hidden post fields are not this campaign's
            ("match_mode", "any_comment"),
            ("dm_text", "Here it is"),
            ("public_replies", "Sent!"),
            ("dm_trigger_enabled", "on"),
            ("opening_dm_enabled", "on"),  # hidden for a story campaign: a comment's step
            ("follow_up_enabled", "on"),
            ("follow_up_text", "Enjoy!"),
        ]
    )
    parsed = parse_campaign_form(form)
    assert check_campaign(parsed, require_complete=True) == {}
    columns = parsed.column_values()
    assert columns["trigger"] is CampaignTrigger.STORY_REPLIES
    assert columns["story_id"] == "17900000000000001"
    assert columns["story_expires_at"] == datetime(2026, 12, 3, 8, 0, tzinfo=UTC)
    assert columns["scope"] is CampaignScope.ANY_POST
    assert columns["media_id"] is None
    # No comment to reply under, and the DM keyword trigger belongs to comment campaigns.
    assert columns["public_replies"] == []
    assert columns["public_reply_enabled"] is False
    assert columns["dm_trigger_enabled"] is False
    assert columns["opening_dm_enabled"] is False
    assert columns["follow_up_enabled"] is True  # the reply opened the 24-hour window
    again = input_from_values(columns)
    assert again.column_values() == columns

    every = _input(trigger="story_replies", story_scope="any_story", story_id="123")
    assert every.column_values()["story_id"] is None
    assert every.column_values()["story_expires_at"] is None


def test_story_campaigns_are_checked_for_what_they_need() -> None:
    unpicked = _input(trigger="story_replies", story_scope="one_story", scope="post")
    assert activation_problems(unpicked) == {
        "story_id": "Pick the story (or answer replies to any story)."
    }
    odd = _input(trigger="story_replies", story_scope="one_story", story_id="../x")
    assert "story_id" in check_campaign(odd, require_complete=False)
    assert "trigger" in check_campaign(_input(trigger="reels"), require_complete=False)
    assert "keywords" in activation_problems(_input(trigger="story_replies", keywords=[]))
    mention = _input(trigger="story_mentions", keywords=[], scope="post", once_per_person=False)
    assert activation_problems(mention) == {}
    columns = mention.column_values()
    assert columns["trigger"] is CampaignTrigger.STORY_MENTIONS
    assert columns["keywords"] == []
    assert columns["once_per_person"] is True
