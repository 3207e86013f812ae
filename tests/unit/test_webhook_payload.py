"""The typed parse of webhook bodies: every shape Meta sends, and everything it should not."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from app.instagram.webhook_payload import (
    CommentItem,
    EnvelopeError,
    MessagingKind,
    StoryAction,
    StoryRef,
    comment_from_graph,
    decode_body,
    parse_webhook,
)

ACCOUNT = "17841405822304914"
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
ENTRY_TIME = int((NOW - timedelta(seconds=30)).timestamp())


def comment_value(comment_id: str = "17870913679156914", **extra: Any) -> dict[str, Any]:
    value: dict[str, Any] = {
        "from": {"id": "1254459154682919", "username": "jane_doe"},
        "media": {"id": "17918195224117851", "media_product_type": "FEED"},
        "id": comment_id,
        "text": "LINK",
    }
    value.update(extra)
    return value


def envelope(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"object": "instagram", "entry": list(entries)}


def parse(document: dict[str, Any]) -> Any:
    return parse_webhook(document, received_at=NOW)


def test_changes_form() -> None:
    parsed = parse(
        envelope(
            {
                "id": ACCOUNT,
                "time": ENTRY_TIME,
                "changes": [{"field": "comments", "value": comment_value()}],
            }
        )
    )
    assert parsed.problems == []
    assert parsed.comments == [
        CommentItem(
            account_ig_id=ACCOUNT,
            comment_id="17870913679156914",
            text="LINK",
            commenter_id="1254459154682919",
            commenter_username="jane_doe",
            is_own=False,
            media_id="17918195224117851",
            original_media_id=None,
            media_product_type="FEED",
            parent_id=None,
            commented_at=NOW - timedelta(seconds=30),
        )
    ]
    assert parsed.item_count == 1


def test_flat_field_value_form_and_facebook_login_variant() -> None:
    value = comment_value()
    del value["id"]
    value["comment_id"] = "555"
    value["media"]["original_media_id"] = "17900000000000001"
    value["media"]["ad_id"] = "1"
    parsed = parse(
        envelope({"id": ACCOUNT, "time": ENTRY_TIME, "field": "comments", "value": value})
    )
    (comment,) = parsed.comments
    assert comment.comment_id == "555"
    assert comment.original_media_id == "17900000000000001"


def test_many_entries_changes_and_live_comments_in_one_post() -> None:
    entries = [
        {
            "id": f"1784140582230{n:04d}",
            "time": ENTRY_TIME,
            "changes": [
                {"field": "comments", "value": comment_value(f"1{n:04d}{k}")} for k in range(5)
            ]
            + [{"field": "live_comments", "value": comment_value(f"2{n:04d}")}],
        }
        for n in range(200)
    ]
    parsed = parse(envelope(*entries))
    assert len(parsed.comments) == 1200
    assert {c.field for c in parsed.comments} == {"comments", "live_comments"}
    assert parsed.comments[0].account_ig_id == "17841405822300000"


def test_own_comments_are_those_from_the_entry_account() -> None:
    own = comment_value(**{"from": {"id": ACCOUNT, "username": "shop"}})
    # As Meta sends the account's own replies: from.id == entry.id, with its scoped id.
    own_scoped = comment_value(
        "2", **{"from": {"id": ACCOUNT, "username": "shop", "self_ig_scoped_id": "123"}}
    )
    # A fan's comment that carries the field is still a fan's comment.
    fan_scoped = comment_value(
        "3", **{"from": {"id": "99", "username": "jane", "self_ig_scoped_id": "456"}}
    )
    reply = comment_value("4", parent_id="17865799348089039")
    parsed = parse(
        envelope(
            {
                "id": ACCOUNT,
                "changes": [
                    {"field": "comments", "value": own},
                    {"field": "comments", "value": own_scoped},
                    {"field": "comments", "value": fan_scoped},
                    {"field": "comments", "value": reply},
                ],
            }
        )
    )
    assert [c.is_own for c in parsed.comments] == [True, True, False, False]
    assert parsed.comments[2].commenter_id == "99"
    assert parsed.comments[3].parent_id == "17865799348089039"


def test_numeric_ids_are_accepted_as_strings_and_nul_is_dropped() -> None:
    value = comment_value(text="hi\u0000there")
    value["id"] = 17870913679156914
    parsed = parse(
        envelope({"id": int(ACCOUNT), "changes": [{"field": "comments", "value": value}]})
    )
    (comment,) = parsed.comments
    assert comment.comment_id == "17870913679156914"
    assert comment.account_ig_id == ACCOUNT
    assert comment.text == "hithere"


def test_entry_time_falls_back_to_receipt_when_missing_or_implausible() -> None:
    for time_value in (None, "yesterday", True, 0, 10**20, ENTRY_TIME + 86_400):
        entry: dict[str, Any] = {
            "id": ACCOUNT,
            "changes": [{"field": "comments", "value": comment_value()}],
        }
        if time_value is not None:
            entry["time"] = time_value
        (comment,) = parse(envelope(entry)).comments
        assert comment.commented_at == NOW, time_value
    # Milliseconds are recognised by their size.
    entry = {
        "id": ACCOUNT,
        "time": ENTRY_TIME * 1000,
        "changes": [{"field": "comments", "value": comment_value()}],
    }
    assert parse(envelope(entry)).comments[0].commented_at == NOW - timedelta(seconds=30)


def test_wrong_field_types_become_problems_and_the_rest_is_kept() -> None:
    bad_values = [
        comment_value(id=["not", "an", "id"]),
        comment_value(id=None),
        comment_value(text=42),
        comment_value(**{"from": "jane"}),
        comment_value(media={"id": {"nested": 1}}),
        comment_value(id="9" * 40),  # longer than the ledger column
        "not an object",
    ]
    changes = [{"field": "comments", "value": v} for v in bad_values]
    changes.append({"field": "comments", "value": comment_value("good")})
    changes.append({"field": 7, "value": {}})
    changes.append("nope")
    parsed = parse(envelope({"id": ACCOUNT, "changes": changes}, "entry is a string", {"id": []}))
    assert [c.comment_id for c in parsed.comments] == ["good"]
    paths = [p.path for p in parsed.problems]
    assert paths == [
        "entry[0].changes[0].value.id",
        "entry[0].changes[1].value.id",
        "entry[0].changes[2].value.text",
        "entry[0].changes[3].value.from",
        "entry[0].changes[4].value.media.id",
        "entry[0].changes[5].value.id",
        "entry[0].changes[6].value",
        "entry[0].changes[8].field",
        "entry[0].changes[9]",
        "entry[1]",
        "entry[2].id",
    ]
    assert parsed.problem_count == len(paths)
    assert all(p.message for p in parsed.problems)


def test_unknown_fields_and_objects() -> None:
    parsed = parse(
        envelope(
            {
                "id": ACCOUNT,
                "changes": [
                    {"field": "mentions", "value": {"media_id": "1", "comment_id": "2"}},
                    {"field": "story_insights", "value": {}},
                ],
                "standby": [{"sender": {"id": "1"}}],
            },
            {"id": ACCOUNT, "time": ENTRY_TIME},
        )
    )
    assert parsed.comments == []
    assert parsed.problems == []
    assert parsed.ignored == {
        "mentions": 1,
        "story_insights": 1,
        "standby": 1,
        "entry_without_items": 1,
    }
    assert parsed.item_count == 4
    with pytest.raises(EnvelopeError, match="unknown object 'page'"):
        parse({"object": "page", "entry": []})
    with pytest.raises(EnvelopeError, match="unknown object None"):
        parse({"entry": []})
    with pytest.raises(EnvelopeError, match="'entry' is an object"):
        parse({"object": "instagram", "entry": {}})


def test_decode_body_refuses_what_is_not_a_json_object() -> None:
    assert decode_body(b'{"a": "\\u00e4\\/"}') == {"a": "ä/"}
    for raw in (
        b"",
        b"{",
        b'{"object": "instagram", "entry": [',  # truncated
        b"\xff\xfe",
        b"not json",
        b'{"a": NaN}',
        b'{"a": "\\ud800"}',  # a lone surrogate cannot be stored
    ):
        with pytest.raises(EnvelopeError, match="not JSON"):
            decode_body(raw)
    for raw in (b"[1, 2]", b'"instagram"', b"null", b"3"):
        with pytest.raises(EnvelopeError, match="not a JSON object"):
            decode_body(raw)


MS = int((NOW - timedelta(seconds=5)).timestamp() * 1000)


def messaging_entry(*items: dict[str, Any]) -> dict[str, Any]:
    return envelope({"id": ACCOUNT, "time": MS, "messaging": list(items)})


def test_messaging_items() -> None:
    fan, business = {"id": "1254459154682919"}, {"id": ACCOUNT}
    items = [
        {
            "sender": fan,
            "recipient": business,
            "timestamp": MS,
            "message": {"mid": "m1", "text": "GUIDE", "quick_reply": {"payload": "Q"}},
        },
        {
            "sender": business,
            "recipient": fan,
            "timestamp": MS,
            "message": {"mid": "m2", "text": "Here you go", "is_echo": True},
        },
        {
            "sender": fan,
            "recipient": business,
            "timestamp": MS,
            "message": {"mid": "m3", "is_deleted": True},
        },
        {
            "sender": fan,
            "recipient": business,
            "timestamp": MS,
            "message": {"mid": "m4", "is_unsupported": True},
        },
        {
            "sender": fan,
            "recipient": business,
            "timestamp": MS,
            "postback": {"mid": "p1", "title": "Get it", "payload": "reveal:abc"},
        },
        {
            "sender": fan,
            "recipient": business,
            "timestamp": MS,
            "reaction": {"mid": "m2", "action": "react", "reaction": "love", "emoji": "❤️"},
        },
        {"sender": fan, "recipient": business, "timestamp": MS, "read": {"mid": "m2"}},
        {
            "sender": fan,
            "recipient": business,
            "timestamp": MS,
            "referral": {"ref": "promo", "source": "SHORTLINK", "type": "OPEN_THREAD"},
        },
        {
            "sender": fan,
            "recipient": business,
            "timestamp": MS,
            "message_edit": {"mid": "m1", "text": "GUIDE!", "num_edit": 1},
        },
        {"sender": fan, "recipient": business, "timestamp": MS, "pass_thread_control": {}},
        {"sender": fan, "recipient": business, "timestamp": "soon", "message": {"mid": 5}},
    ]
    parsed = parse(messaging_entry(*items))
    kinds = [m.kind for m in parsed.messaging]
    assert kinds == [
        MessagingKind.MESSAGE,
        MessagingKind.ECHO,
        MessagingKind.MESSAGE,
        MessagingKind.MESSAGE,
        MessagingKind.POSTBACK,
        MessagingKind.REACTION,
        MessagingKind.READ,
        MessagingKind.REFERRAL,
        MessagingKind.EDIT,
        MessagingKind.MESSAGE,
    ]
    message, echo, deleted, unsupported, postback = parsed.messaging[:5]
    assert (message.user_id, message.mid, message.text, message.payload) == (
        "1254459154682919",
        "m1",
        "GUIDE",
        "Q",
    )
    assert message.occurred_at == NOW - timedelta(seconds=5)
    assert echo.user_id == "1254459154682919"  # the person, not us
    assert deleted.is_deleted
    assert unsupported.is_unsupported
    assert (postback.mid, postback.payload, postback.text) == ("p1", "reveal:abc", "Get it")
    assert parsed.ignored == {"messaging.pass_thread_control": 1}
    # A numeric mid is accepted as a string; an unparseable timestamp falls back to entry.time.
    assert parsed.messaging[-1].mid == "5"
    assert parsed.messaging[-1].occurred_at == NOW - timedelta(seconds=5)


def test_messaging_in_the_changes_shape_as_the_dashboard_test_sends_it() -> None:
    value = {
        "sender": {"id": "12334"},
        "recipient": {"id": "23245"},
        "timestamp": "1527459824",
        "message": {"mid": "random_mid", "text": "random_text"},
    }
    parsed = parse(
        envelope({"id": "0", "time": MS, "changes": [{"field": "messages", "value": value}]})
    )
    (message,) = parsed.messaging
    assert message.kind is MessagingKind.MESSAGE
    assert message.text == "random_text"


def test_messaging_with_wrong_types_is_a_problem() -> None:
    items = [
        {"sender": {"id": "1"}, "message": "text"},
        {"sender": "1", "message": {"mid": "m"}},
        {"sender": {"id": "1"}, "message": {"mid": "m", "text": ["x"]}},
        {"sender": {"id": "1"}, "postback": None},
    ]
    parsed = parse(messaging_entry(*items))
    assert parsed.messaging == []
    assert [p.path for p in parsed.problems] == [
        "entry[0].messaging[0].message",
        "entry[0].messaging[1].sender",
        "entry[0].messaging[2].message.text",
        "entry[0].messaging[3].postback",
    ]


def test_comment_from_graph() -> None:
    data = {
        "id": "17870913679156914",
        "text": "LINK",
        "timestamp": "2025-06-01T12:05:02+0000",
        "from": {"id": "1254459154682919", "username": "jane_doe"},
    }
    comment = comment_from_graph(ACCOUNT, "17918195224117851", data, fallback_time=NOW)
    assert comment.commented_at == datetime(2025, 6, 1, 12, 5, 2, tzinfo=UTC)
    assert comment.commenter_username == "jane_doe"
    assert not comment.is_own
    own = comment_from_graph(ACCOUNT, "1", {"id": "2", "from": {"id": ACCOUNT}}, fallback_time=NOW)
    assert own.is_own
    assert own.commented_at == NOW
    with pytest.raises(ValueError, match=r"comment\.id"):
        comment_from_graph(ACCOUNT, "1", {"text": "x"}, fallback_time=NOW)


def test_the_parse_is_independent_of_json_escaping() -> None:
    document = envelope(
        {
            "id": ACCOUNT,
            "changes": [{"field": "comments", "value": comment_value(text="äö / <@%>")}],
        }
    )
    escaped = json.dumps(document, ensure_ascii=True).replace("/", "\\/").encode()
    plain = json.dumps(document, ensure_ascii=False).encode()
    assert parse(decode_body(escaped)).comments == parse(decode_body(plain)).comments
    assert parse(decode_body(escaped)).comments[0].text == "äö / <@%>"


def test_story_replies_and_story_mentions_carry_their_story() -> None:
    fan, business = {"id": "1254459154682919"}, {"id": ACCOUNT}
    story_url = "https://lookaside.fbsbx.com/ig_messaging_cdn/?asset_id=1"

    def message(body: dict[str, Any]) -> dict[str, Any]:
        return {"sender": fan, "recipient": business, "timestamp": MS, "message": body}

    parsed = parse(
        messaging_entry(
            message(
                {
                    "mid": "s1",
                    "text": "LOAF",
                    "reply_to": {"story": {"url": story_url, "id": "17900000000000001"}},
                }
            ),
            message(
                {
                    "mid": "s2",
                    "attachments": [{"type": "story_mention", "payload": {"url": story_url}}],
                }
            ),
            message({"mid": "s3", "text": "odd", "reply_to": {"story": {"id": ["not", "id"]}}}),
            message({"mid": "s4", "text": "plain", "reply_to": {"mid": "m0"}}),
            message({"mid": "s5", "text": "echo", "is_echo": True, "reply_to": {"story": {}}}),
        )
    )
    assert parsed.problems == []
    reply, mention, odd, plain, echo = parsed.messaging
    assert reply.story == StoryRef(StoryAction.REPLY, "17900000000000001", story_url)
    assert reply.text == "LOAF"
    assert reply.extra["story"] == "reply"
    assert reply.extra["story_id"] == "17900000000000001"
    assert mention.story == StoryRef(StoryAction.MENTION, None, story_url)
    assert mention.text is None
    assert mention.extra["attachments"] == ["story_mention"]
    # An odd story id loses the story's details, never the person's message.
    assert odd.story == StoryRef(StoryAction.REPLY, None, None)
    assert odd.text == "odd"
    assert plain.story is None
    assert plain.extra == {"reply_to_mid": "m0"}
    assert echo.kind is MessagingKind.ECHO
    assert echo.story is None
