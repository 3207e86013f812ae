"""Stories: the account posts them (live 24 hours, listed by `/stories`, never by `/media`),
a fan replies to one or mentions the account in a story of their own, and each arrives on
the `messages` webhook with the fields Meta sends; either opens the 24-hour window."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from sandbox.client import SandboxAdmin, SandboxError
from tests.integration.sandbox.helpers import (
    DAY,
    JANE_SUNNY_IGSID,
    LEMON_REEL,
    SUNNY,
    direct_message,
    error_of,
)
from tests.support.sandbox_process import ReceivedWebhook, WebhookReceiver


def messaging(posts: list[ReceivedWebhook]) -> list[dict[str, Any]]:
    return [m for post in posts for e in post.json()["entry"] for m in e.get("messaging", [])]


def test_a_story_is_listed_by_stories_while_live_and_never_by_media(
    graph: httpx.Client, admin: SandboxAdmin, token: str
) -> None:
    story = admin.publish_story("sunny.bakes", "Reply LOAF for the recipe")
    assert story["media_product_type"] == "STORY"
    assert story["expires_time"] > story["timestamp"]

    fields = "id,caption,media_product_type,permalink,timestamp"
    listed = graph.get(f"/{SUNNY}/stories", params={"access_token": token, "fields": fields})
    assert listed.status_code == 200
    [shown] = listed.json()["data"]
    assert shown["id"] == story["id"]
    assert shown["media_product_type"] == "STORY"
    assert shown["permalink"] == f"https://www.instagram.com/stories/sunny.bakes/{story['id']}/"
    media = graph.get(f"/{SUNNY}/media", params={"access_token": token, "limit": 100})
    assert story["id"] not in {m["id"] for m in media.json()["data"]}

    admin.advance_clock(DAY + 1)
    gone = graph.get(f"/{SUNNY}/stories", params={"access_token": token})
    assert gone.json()["data"] == []


def test_a_story_reply_arrives_on_messages_with_reply_to_story_and_opens_the_window(
    graph: httpx.Client, admin: SandboxAdmin, token: str, receiver: WebhookReceiver
) -> None:
    story = admin.publish_story("sunny.bakes", "Reply LOAF")
    sent = admin.fan_story_reply("jane.doe", "sunny.bakes", story["id"], "LOAF please 🍞")
    assert sent["kind"] == "story_reply"
    assert sent["reply_to_story"]["id"] == story["id"]

    [item] = messaging(receiver.wait_for(1))
    assert item["sender"] == {"id": JANE_SUNNY_IGSID}
    assert item["recipient"] == {"id": SUNNY}
    message = item["message"]
    assert message["mid"] == sent["mid"]
    assert message["text"] == "LOAF please 🍞"
    assert message["reply_to"]["story"]["id"] == story["id"]
    assert message["reply_to"]["story"]["url"].startswith("https://")
    assert "is_echo" not in message
    [event] = admin.webhook_events(field="messages")["events"]
    assert event["fan"] == "jane.doe"

    answer = direct_message(graph, token, JANE_SUNNY_IGSID, {"text": "Here it is"})
    assert answer.status_code == 200, answer.text


def test_a_story_mention_arrives_as_a_story_mention_attachment_and_opens_the_window(
    graph: httpx.Client, admin: SandboxAdmin, token: str, receiver: WebhookReceiver
) -> None:
    before = direct_message(graph, token, JANE_SUNNY_IGSID, {"text": "too early"})
    assert error_of(before)["code"] == 10  # no window before the mention

    sent = admin.fan_story_mention("jane.doe", "sunny.bakes")
    assert sent["kind"] == "story_mention"

    [item] = messaging(receiver.wait_for(1))
    message = item["message"]
    assert item["sender"] == {"id": JANE_SUNNY_IGSID}
    assert message["mid"] == sent["mid"]
    assert "text" not in message
    [attachment] = message["attachments"]
    assert attachment["type"] == "story_mention"
    assert attachment["payload"]["url"].startswith("https://lookaside.fbsbx.com/")

    answer = direct_message(graph, token, JANE_SUNNY_IGSID, {"text": "Thanks for the mention!"})
    assert answer.status_code == 200, answer.text


def test_replies_to_expired_unknown_or_foreign_stories_and_comments_on_stories_are_refused(
    admin: SandboxAdmin, token: str
) -> None:
    story = admin.publish_story("sunny.bakes", "gone tomorrow")
    north = admin.publish_story("north.trails", "not sunny's")
    with pytest.raises(SandboxError) as foreign:
        admin.fan_story_reply("jane.doe", "sunny.bakes", north["id"], "hi")
    assert foreign.value.status == 404
    with pytest.raises(SandboxError) as post:
        admin.fan_story_reply("jane.doe", "sunny.bakes", LEMON_REEL, "hi")
    assert post.value.status == 404
    with pytest.raises(SandboxError) as comment:
        admin.fan_comment("jane.doe", story["id"], "LOAF")
    assert "replies, not comments" in comment.value.body["error"]

    admin.advance_clock(DAY + 1)
    with pytest.raises(SandboxError) as expired:
        admin.fan_story_reply("jane.doe", "sunny.bakes", story["id"], "LOAF")
    assert expired.value.status == 400
    assert "expired" in expired.value.body["error"]


def test_the_fan_page_replies_to_a_live_story_and_mentions_the_account(
    sandbox_process: Any, admin: SandboxAdmin, token: str, receiver: WebhookReceiver
) -> None:
    admin.update_settings(webhook_batch_window_ms=0)
    story = admin.publish_story("sunny.bakes", "Reply LOAF on the page")
    with httpx.Client(base_url=sandbox_process.base_url, timeout=10) as page:
        feed = page.get("/fan", params={"fan": "jane.doe"})
        assert f'data-story="{story["id"]}"' in feed.text
        replied = page.post(
            "/fan/story_reply",
            data={
                "fan": "jane.doe",
                "account": SUNNY,
                "story_id": story["id"],
                "text": "LOAF",
            },
        )
        assert replied.status_code == 303
        mentioned = page.post("/fan/story_mention", data={"fan": "jane.doe", "account": SUNNY})
        assert mentioned.status_code == 303
        refused = page.post(
            "/fan/story_reply",
            data={"fan": "jane.doe", "account": SUNNY, "story_id": "nope", "text": "x"},
        )
        assert "error=" in refused.headers["location"]
    items = messaging(receiver.wait_for(2))
    kinds = sorted(
        "reply" if "reply_to" in i["message"] else i["message"]["attachments"][0]["type"]
        for i in items
    )
    assert kinds == ["reply", "story_mention"]


def test_a_creator_posts_a_story_from_the_home_page(
    sandbox_process: Any, graph: httpx.Client, admin: SandboxAdmin, token: str
) -> None:
    with httpx.Client(base_url=sandbox_process.base_url, timeout=10) as page:
        posted = page.post("/creator/story", data={"account": SUNNY, "caption": "Fresh loaf"})
        assert posted.status_code == 303
        home = page.get("/")
        assert "Fresh loaf" in home.text
        unknown = page.post("/creator/story", data={"account": "nobody", "caption": "x"})
        assert "error=" in unknown.headers["location"]
    listed = graph.get(f"/{SUNNY}/stories", params={"access_token": token, "fields": "caption"})
    assert [s["caption"] for s in listed.json()["data"]] == ["Fresh loaf"]
