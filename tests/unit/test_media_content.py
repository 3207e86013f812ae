"""Images and cards in the DM: the editor's limits, the Send API objects and where they go."""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest
from litestar.datastructures import FormMultiDict

from app.campaigns.image_check import address_allowed
from app.campaigns.media_message import Card, card_message, image_message
from app.campaigns.message_format import LinkButton
from app.campaigns.validation import (
    CampaignInput,
    check_campaign,
    input_from_values,
    parse_campaign_form,
)
from app.db.models import MessageKind
from app.delivery.content.compose import CampaignTexts, content_for, reveal


def _input(**changes: Any) -> CampaignInput:
    values: dict[str, Any] = {
        "name": "Lemon loaf",
        "account_id": "1",
        "scope": "any_post",
        "keywords": ["RECIPE"],
        "dm_text": "Hi!",
        "opening_dm_enabled": True,
        "opening_dm_text": "Tap for the recipe",
        "opening_dm_button_title": "Send it",
    }
    values.update(changes)
    return CampaignInput(**values)


@pytest.mark.parametrize(
    ("url", "ok"),
    [
        ("https://example.com/cover.jpg", True),
        ("https://cdn.example.com/a/b.png?x=1", True),
        ("http://example.com/cover.jpg", False),  # Instagram fetches over https
        ("http://127.0.0.1:8100/media/cover.png", True),  # the dev sandbox; the check decides
        ("http://localhost/cover.png", True),
        ("ftp://example.com/cover.jpg", False),
        ("javascript:alert(1)", False),
        ("https://", False),
        ("cover.jpg", False),
        ("https://user:secret@example.com/a.jpg", False),
        ("https://example.com/a b.jpg", False),
        ("https://example.com/" + "a" * 2000, False),
        ("https://[x/a.png", False),  # a bracketed host that is no address: an error, not a crash
        ("https://example.com:99999/a.png", False),
        ("https://example.com:abc/a.png", False),
    ],
)
def test_image_link(url: str, ok: bool) -> None:
    errors = check_campaign(_input(dm_image_url=url), require_complete=True)
    assert ("dm_image_url" not in errors) is ok, errors


@pytest.mark.parametrize(
    ("title", "ok"),
    [
        ("a" * 80, True),
        ("a" * 81, False),
        ("🍋" * 40, True),  # counted as Meta counts: code points (each lemon is one)
        ("🍋" * 81, False),
        ("x" * 50 + "{username}", True),  # {username} counts as 30
        ("x" * 51 + "{username}", False),
        ("Hi {name}", False),  # unknown placeholder
        ("Hi {link}", False),  # the buttons carry the link
    ],
)
def test_card_title_limit(title: str, ok: bool) -> None:
    errors = check_campaign(_input(card_enabled=True, card_title=title), require_complete=True)
    assert ("card_title" not in errors) is ok, errors


def test_card_subtitle_limit_and_title_required() -> None:
    errors = check_campaign(
        _input(card_enabled=True, card_title="", card_subtitle="b" * 81), require_complete=False
    )
    assert errors["card_title"].startswith("Give the card a title")
    assert "at most 80 characters: this is 81" in errors["card_subtitle"]
    ok = check_campaign(
        _input(card_enabled=True, card_title="T", card_subtitle="b" * 80), require_complete=True
    )
    assert ok == {}


def test_a_card_keeps_the_three_button_limit() -> None:
    form = FormMultiDict(
        [
            ("name", "x"),
            ("account_id", "1"),
            ("scope", "any_post"),
            ("keywords", "RECIPE"),
            ("dm_text", "Hi"),
            ("card_enabled", "on"),
            ("card_title", "Recipe"),
            *[
                item
                for i in range(1, 5)
                for item in ((f"button_title_{i}", f"B{i}"), (f"button_url_{i}", "https://e.x/"))
            ],
        ]
    )
    errors = check_campaign(parse_campaign_form(form), require_complete=False)
    assert errors["buttons"].startswith("At most 3 buttons"), errors


def test_images_and_cards_need_a_dm_to_go_in() -> None:
    plain = {"opening_dm_enabled": False}
    for media in ({"dm_image_url": "https://e.x/a.png"}, {"card_enabled": True, "card_title": "T"}):
        live = check_campaign(_input(**plain, **media), require_complete=True)
        [(field, problem)] = [
            (k, v) for k, v in live.items() if k in ("dm_image_url", "card_enabled")
        ]
        assert "private reply to a comment carries text and buttons only" in problem, field
        # A draft may be saved so; each of the three ways in makes it complete.
        assert check_campaign(_input(**plain, **media), require_complete=False) == {}
        for way in ("opening_dm_enabled", "follow_gate_enabled", "dm_trigger_enabled"):
            extra = {
                **plain,
                way: True,
                "follow_prompt_text": "Follow",
                "follow_prompt_button_title": "Ok",
            }
            assert check_campaign(_input(**media, **extra), require_complete=True) == {}


def test_the_media_fields_round_trip_through_the_columns() -> None:
    form = FormMultiDict(
        [
            ("name", "x"),
            ("account_id", "1"),
            ("scope", "any_post"),
            ("keywords", "RECIPE"),
            ("dm_text", "Hi"),
            ("dm_image_url", " https://e.x/a.png "),
            ("card_enabled", "on"),
            ("card_title", "Recipe for {username}"),
            ("card_subtitle", "20 minutes"),
        ]
    )
    parsed = parse_campaign_form(form)
    columns = parsed.column_values()
    assert columns["dm_image_url"] == "https://e.x/a.png"
    assert columns["card_enabled"] is True
    assert (columns["card_title"], columns["card_subtitle"]) == (
        "Recipe for {username}",
        "20 minutes",
    )
    assert input_from_values(columns).column_values() == columns
    assert _input().column_values()["dm_image_url"] is None


def test_card_message_is_a_generic_template_cut_to_the_limits() -> None:
    buttons = [
        LinkButton("Get the recipe now please", "https://e.x/r"),
        LinkButton("Shop", "https://e.x/s"),
    ]
    message = card_message(
        Card("Recipe for {username} " + "🍋" * 100, "sub"),
        buttons,
        image_url="https://e.x/a.png",
        username="jane",
    )
    assert message.kind == "card"
    payload = message.body["attachment"]["payload"]
    assert payload["template_type"] == "generic"
    [element] = payload["elements"]
    assert element["title"].startswith("Recipe for jane 🍋")
    assert len(element["title"]) <= 80
    assert element["subtitle"] == "sub"
    assert element["image_url"] == "https://e.x/a.png"
    assert element["default_action"] == {"type": "web_url", "url": "https://e.x/r"}
    assert [b["title"] for b in element["buttons"]] == ["Get the recipe now p", "Shop"]
    bare = card_message(Card("T"), [], image_url=None, username=None)
    [element] = bare.body["attachment"]["payload"]["elements"]
    assert element == {"title": "T"}


def test_image_message() -> None:
    message = image_message("https://e.x/a.png")
    assert message.body == {
        "attachment": {"type": "image", "payload": {"url": "https://e.x/a.png"}}
    }
    assert message.kind == "image"


def _texts(**changes: Any) -> CampaignTexts:
    values: dict[str, Any] = {
        "campaign_id": 5,
        "dm_text": "Here it is, {username}",
        "buttons": [{"title": "Recipe", "url": "https://e.x/r"}],
        "image_url": "https://e.x/a.png",
        "card": Card("Your recipe"),
    }
    values.update(changes)
    return CampaignTexts(**values)


def test_a_private_reply_never_carries_an_image_or_a_card() -> None:
    content = content_for(MessageKind.REVEAL, _texts(), username="jane", frozen_text=None)
    assert content.message.kind == "template"
    assert content.message.body["attachment"]["payload"]["template_type"] == "button"
    assert content.lead is None
    assert [m.kind for m in content.fallbacks] == ["text"]


def test_a_dm_sends_the_card_with_the_button_template_then_text_as_fallbacks() -> None:
    tracked = reveal(_texts(), username="jane", track=lambda i, url: f"{url}?t={i}", direct=True)
    assert tracked.message.kind == "card"
    [element] = tracked.message.body["attachment"]["payload"]["elements"]
    assert element["buttons"][0]["url"] == "https://e.x/r?t=0"
    assert [m.kind for m in tracked.fallbacks] == ["template", "text"]
    assert tracked.lead is None  # the image is in the card


def test_a_dm_without_a_card_sends_the_image_first() -> None:
    content = reveal(_texts(card=None), username="jane", direct=True)
    assert content.lead is not None
    assert content.lead.kind == "image"
    assert content.message.kind == "template"
    plain = reveal(_texts(card=None, image_url=None), username="jane", direct=True)
    assert plain.lead is None


@pytest.mark.parametrize(
    ("address", "loopback_ok", "allowed"),
    [
        ("93.184.216.34", False, True),
        ("2606:2800:220:1:248:1893:25c8:1946", False, True),
        ("10.0.0.5", True, False),
        ("172.16.3.4", True, False),
        ("192.168.1.1", True, False),
        ("169.254.169.254", True, False),  # cloud metadata
        ("100.64.0.1", True, False),  # shared address space
        ("0.0.0.0", True, False),  # noqa: S104 - an address refused, not bound
        ("224.0.0.1", True, False),
        ("fe80::1", True, False),
        ("fc00::1", True, False),
        ("::ffff:10.0.0.1", True, False),  # an IPv4-mapped private address
        ("127.0.0.1", False, False),
        ("127.0.0.1", True, True),
        ("::1", True, True),
        ("::ffff:127.0.0.1", False, False),
    ],
)
def test_only_public_addresses_are_asked(address: str, loopback_ok: bool, allowed: bool) -> None:
    ip = ipaddress.ip_address(address)
    assert address_allowed(ip, allow_loopback=loopback_ok) is allowed


def test_a_story_campaign_always_answers_by_dm() -> None:
    for trigger in ("story_replies", "story_mentions"):
        form = _input(
            trigger=trigger,
            opening_dm_enabled=False,
            keywords=[] if trigger == "story_mentions" else ["RECIPE"],
            match_mode="any_comment" if trigger == "story_mentions" else "whole_word",
            dm_image_url="https://e.x/a.png",
            card_enabled=True,
            card_title="Recipe",
        )
        errors = check_campaign(form, require_complete=True)
        assert "card_enabled" not in errors, errors
        assert "dm_image_url" not in errors, errors


def test_a_button_link_that_cannot_be_parsed_is_a_field_error() -> None:
    buttons = [LinkButton("Get it", "https://[x/guide"), LinkButton("", ""), LinkButton("", "")]
    errors = check_campaign(_input(buttons=buttons), require_complete=False)
    assert errors["button_1"].startswith("Use a full https:// link")
