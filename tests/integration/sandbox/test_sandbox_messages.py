"""The Send API's rules: one private reply per comment, the 7-day and 24-hour windows,
deleted comments, message limits, the hourly private-reply limit and the per-second limit."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from sandbox.client import SandboxAdmin
from tests.integration.sandbox.helpers import (
    DAY,
    JANE_SUNNY_IGSID,
    LEMON_REEL,
    MARCO_COMMENT,
    NORTH_REEL,
    OLD_COMMENT,
    OLGA_COMMENT,
    SUNNY,
    direct_message,
    error_of,
    private_reply,
)


def button_template(text: str, *buttons: dict[str, Any]) -> dict[str, Any]:
    payload = {"template_type": "button", "text": text, "buttons": list(buttons)}
    return {"attachment": {"type": "template", "payload": payload}}


def postback(title: str = "Get it", payload: str = "reveal:1") -> dict[str, str]:
    return {"type": "postback", "title": title, "payload": payload}


def test_private_reply_succeeds_once_then_2534025(
    graph: httpx.Client, admin: SandboxAdmin, token: str
) -> None:
    first = private_reply(graph, token, OLGA_COMMENT, {"text": "Вот рецепт 🍋"})
    assert first.status_code == 200
    olga = admin.inbox("olga.petrova")
    assert first.json() == {
        "recipient_id": olga["igsids"][SUNNY],
        "message_id": olga["messages"][0]["mid"],
    }
    assert first.json()["message_id"].startswith("aWdf")
    assert "x-business-use-case-usage" in first.headers

    second = private_reply(graph, token, OLGA_COMMENT)
    assert second.status_code == 400
    error = error_of(second)
    assert (error["code"], error["error_subcode"]) == (100, 2534025)

    stats = admin.comment_stats(OLGA_COMMENT)
    assert (stats["private_replies_delivered"], stats["send_requests"]) == (1, 2)
    assert [m["text"] for m in admin.inbox("olga.petrova")["messages"]] == ["Вот рецепт 🍋"]
    requests = admin.requests(endpoint="messages", comment_id=OLGA_COMMENT)
    assert [r["status"] for r in requests] == [200, 400]
    assert requests[1]["error"]["subcode"] == 2534025


def test_switching_enforcement_off_models_a_second_delivery(
    graph: httpx.Client, admin: SandboxAdmin, token: str
) -> None:
    admin.update_settings(enforce_one_private_reply=False)
    assert private_reply(graph, token, OLGA_COMMENT).status_code == 200
    assert private_reply(graph, token, OLGA_COMMENT).status_code == 200
    assert admin.comment_stats(OLGA_COMMENT)["private_replies_delivered"] == 2
    assert len(admin.inbox("olga.petrova")["messages"]) == 2


def test_seven_day_window(graph: httpx.Client, admin: SandboxAdmin, token: str) -> None:
    too_old = private_reply(graph, token, OLD_COMMENT)  # 9.6 days old in the fixture
    assert too_old.status_code == 403
    assert (error_of(too_old)["code"], error_of(too_old)["error_subcode"]) == (10, 2534022)
    assert error_of(too_old)["message"] == "This message is sent outside of allowed window."

    fresh = admin.fan_comment("jane.doe", LEMON_REEL, "RECIPE")["id"]
    admin.advance_clock(7 * DAY + 60)
    late = private_reply(graph, token, fresh)
    assert (late.status_code, error_of(late)["error_subcode"]) == (403, 2534022)
    assert admin.comment_stats(fresh)["private_replies_delivered"] == 0


def test_deleted_comment_is_100_33(graph: httpx.Client, admin: SandboxAdmin, token: str) -> None:
    admin.delete_comment(MARCO_COMMENT)
    answer = private_reply(graph, token, MARCO_COMMENT)
    assert answer.status_code == 400
    assert (error_of(answer)["code"], error_of(answer)["error_subcode"]) == (100, 33)


def test_dm_needs_the_24_hour_window(graph: httpx.Client, admin: SandboxAdmin, token: str) -> None:
    assert private_reply(graph, token, OLGA_COMMENT).status_code == 200
    olga = admin.inbox("olga.petrova")["igsids"][SUNNY]

    # A private reply does not open the window.
    closed = direct_message(graph, token, olga)
    assert closed.status_code == 403
    assert (error_of(closed)["code"], error_of(closed)["error_subcode"]) == (10, 2534022)

    # The fan answering opens it for 24 hours.
    admin.fan_dm("olga.petrova", "sunny.bakes", "спасибо!")
    assert direct_message(graph, token, olga).status_code == 200
    admin.advance_clock(DAY + 1)
    assert direct_message(graph, token, olga).status_code == 403

    # A postback tap opens it again.
    jane = JANE_SUNNY_IGSID
    assert direct_message(graph, token, jane).status_code == 403
    admin.fan_dm("jane.doe", "sunny.bakes", "hello")
    sent = direct_message(graph, token, jane, button_template("Want it?", postback()))
    assert sent.status_code == 200
    admin.advance_clock(DAY + 1)
    admin.fan_tap("jane.doe", "sunny.bakes", mid=sent.json()["message_id"])
    assert direct_message(graph, token, jane).status_code == 200


def test_form_encoded_send_with_json_strings(
    graph: httpx.Client, admin: SandboxAdmin, token: str
) -> None:
    answer = graph.post(
        "/me/messages",
        data={
            "recipient": json.dumps({"comment_id": OLGA_COMMENT}),
            "message": json.dumps({"text": "form style"}),
            "access_token": token,
        },
    )
    assert answer.status_code == 200, answer.text
    assert admin.inbox("olga.petrova")["messages"][0]["text"] == "form style"


@pytest.mark.parametrize(
    ("message", "mentions"),
    [
        ({"text": "é" * 501}, "message[text]"),  # 1002 bytes, 501 characters
        (button_template("x" * 641, postback()), "[payload][text]"),
        (button_template("Pick", postback(), postback(), postback(), postback()), "[buttons]"),
        (button_template("Pick"), "[buttons]"),
        (button_template("Pick", postback(title="t" * 21)), "[buttons][0][title]"),
        (button_template("Pick", {"type": "call", "title": "Call"}), "[buttons][0][type]"),
        (
            {
                "text": "Pick",
                "quick_replies": [
                    {"content_type": "text", "title": f"q{i}", "payload": f"Q{i}"}
                    for i in range(14)
                ],
            },
            "quick_replies",
        ),
        (
            {
                "text": "a",
                "attachment": {"type": "image", "payload": {"url": "https://x.example/a.jpg"}},
            },
            "message",
        ),
        ({}, "message"),
    ],
)
def test_message_limits(
    graph: httpx.Client, admin: SandboxAdmin, token: str, message: dict[str, Any], mentions: str
) -> None:
    answer = private_reply(graph, token, OLGA_COMMENT, message)
    assert answer.status_code == 400
    error = error_of(answer)
    assert error["code"] == 100
    assert mentions in error["message"]
    # A refused message does not use up the comment's private reply.
    assert admin.comment_stats(OLGA_COMMENT)["private_replies_delivered"] == 0
    assert private_reply(graph, token, OLGA_COMMENT).status_code == 200


def test_limits_that_pass(graph: httpx.Client, admin: SandboxAdmin, token: str) -> None:
    exactly = button_template(
        "x" * 640,
        postback(title="t" * 20),
        {"type": "web_url", "title": "Open", "url": "https://sunny.example/r"},
        postback(title="Third", payload="p3"),
    )
    assert private_reply(graph, token, OLGA_COMMENT, exactly).status_code == 200
    long_titles = {
        "text": "é" * 500,  # exactly 1000 bytes
        "quick_replies": [{"content_type": "text", "title": "t" * 30, "payload": "P"}],
    }
    assert private_reply(graph, token, MARCO_COMMENT, long_titles).status_code == 200
    got = admin.inbox("marco_rossi")["messages"][0]
    assert got["quick_replies"][0]["title"] == "t" * 20  # Instagram truncates, never refuses


def test_hourly_private_reply_limit_with_usage_header(
    graph: httpx.Client, admin: SandboxAdmin, token: str
) -> None:
    admin.update_settings(private_replies_per_hour=3, webhook_batch_window_ms=0)
    comments = [admin.fan_comment("jane.doe", LEMON_REEL, f"RECIPE {i}")["id"] for i in range(4)]
    answers = [private_reply(graph, token, c) for c in comments]
    assert [a.status_code for a in answers] == [200, 200, 200, 400]
    error = error_of(answers[3])
    assert (error["code"], error["error_subcode"]) == (613, 2534040)
    usage = json.loads(answers[3].headers["x-business-use-case-usage"])
    assert usage[SUNNY][0]["call_count"] == 100
    assert usage[SUNNY][0]["estimated_time_to_regain_access"] > 0
    assert json.loads(answers[0].headers["x-business-use-case-usage"])[SUNNY][0]["call_count"] == 33
    # The limited comment keeps its private reply; an hour later it goes through.
    admin.advance_clock(3601)
    assert private_reply(graph, token, comments[3]).status_code == 200


def test_per_second_send_limit_is_code_4(
    graph: httpx.Client, admin: SandboxAdmin, token: str
) -> None:
    admin.update_settings(sends_per_second=2, webhook_batch_window_ms=0)
    comments = [admin.fan_comment("jane.doe", LEMON_REEL, f"GO {i}")["id"] for i in range(4)]
    answers = [private_reply(graph, token, c) for c in comments]
    limited = [a for a in answers if a.status_code != 200]
    assert limited, [a.status_code for a in answers]
    error = error_of(limited[0])
    assert (error["code"], error["is_transient"], error["message"]) == (
        4,
        True,
        "(#4) Application request limit reached",
    )
    # The usage header comes with the refusal too, as Meta sends it; the wait is under a minute.
    usage = json.loads(limited[0].headers["x-business-use-case-usage"])
    assert usage[SUNNY][0]["call_count"] == 100
    assert usage[SUNNY][0]["estimated_time_to_regain_access"] == 0
    assert "x-app-usage" in limited[0].headers


def test_human_agent_tag_needs_approval(
    graph: httpx.Client, admin: SandboxAdmin, token: str
) -> None:
    admin.fan_dm("jane.doe", "sunny.bakes", "hello?")
    admin.advance_clock(3 * DAY)
    body = {
        "recipient": {"id": JANE_SUNNY_IGSID},
        "messaging_type": "MESSAGE_TAG",
        "tag": "HUMAN_AGENT",
        "message": {"text": "Sorry for the wait"},
    }
    refused = graph.post("/me/messages", params={"access_token": token}, json=body)
    assert refused.status_code == 403
    assert "Human Agent" in error_of(refused)["message"]
    admin.update_settings(human_agent_approved=True)
    assert graph.post("/me/messages", params={"access_token": token}, json=body).status_code == 200


def test_token_without_messaging_scope(graph: httpx.Client, admin: SandboxAdmin) -> None:
    basic = admin.mint_token("sunny.bakes", scopes=["instagram_business_basic"])["access_token"]
    answer = private_reply(graph, basic, OLGA_COMMENT)
    assert answer.status_code == 403
    assert error_of(answer)["code"] == 200
    assert admin.requests(endpoint="messages")[0]["error"]["code"] == 200


def test_private_reply_also_needs_the_comments_scope(
    graph: httpx.Client, admin: SandboxAdmin
) -> None:
    messages_only = admin.mint_token(
        "sunny.bakes", scopes=["instagram_business_basic", "instagram_business_manage_messages"]
    )["access_token"]
    answer = private_reply(graph, messages_only, OLGA_COMMENT)
    assert answer.status_code == 403
    error = error_of(answer)
    assert error["code"] == 200
    assert "instagram_business_manage_comments" in error["message"]
    assert admin.comment_stats(OLGA_COMMENT)["private_replies_delivered"] == 0

    # A DM inside the window acts on no comment: the messaging scope is enough.
    admin.fan_dm("jane.doe", "sunny.bakes", "Hi!")
    assert direct_message(graph, messages_only, JANE_SUNNY_IGSID).status_code == 200


def test_media_share_only_of_the_accounts_own_media(
    graph: httpx.Client, admin: SandboxAdmin, token: str
) -> None:
    def share(media_id: str) -> dict[str, Any]:
        return {"attachment": {"type": "MEDIA_SHARE", "payload": {"id": media_id}}}

    foreign = private_reply(graph, token, OLGA_COMMENT, share(NORTH_REEL))
    assert (error_of(foreign)["code"], error_of(foreign)["error_subcode"]) == (100, 2534015)
    assert private_reply(graph, token, OLGA_COMMENT, share(LEMON_REEL)).status_code == 200
