"""Webhooks the sandbox sends: signatures over the raw bytes, escaping, shapes, batching,
retries, and the drop/duplicate/delay faults."""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import time
from typing import Any

import httpx

from sandbox.client import SandboxAdmin
from tests.integration.sandbox.helpers import (
    APP_SECRET,
    LEMON_REEL,
    META_SECRET,
    OLGA_COMMENT,
    SUNNY,
    VERIFY_TOKEN,
    private_reply,
)
from tests.support.processes import wait_until
from tests.support.sandbox_process import ReceivedWebhook, WebhookReceiver


def changes(post: ReceivedWebhook) -> list[dict[str, Any]]:
    return [c for entry in post.json()["entry"] for c in entry.get("changes", [])]


def messaging(post: ReceivedWebhook) -> list[dict[str, Any]]:
    return [m for entry in post.json()["entry"] for m in entry.get("messaging", [])]


def test_comment_event_is_signed_over_the_exact_bytes_with_escapes(
    admin: SandboxAdmin, token: str, receiver: WebhookReceiver
) -> None:
    made = admin.fan_comment("olga.petrova", LEMON_REEL, "Хочу RECIPE 🍋 s'il vous plaît")
    [post] = receiver.wait_for(1)

    expected = "sha256=" + hmac.new(APP_SECRET.encode(), post.body, hashlib.sha256).hexdigest()
    assert post.headers["x-hub-signature-256"] == expected
    assert post.signature_valid(APP_SECRET)
    assert not post.signature_valid(META_SECRET)
    assert post.headers["x-hub-signature"].startswith("sha1=")
    # Non-ASCII travels as \uXXXX escapes: re-serialising the parsed JSON would not match.
    assert post.body.isascii()
    assert b"\\u0425\\u043e\\u0447\\u0443" in post.body  # "Хочу"
    assert b"\\ud83c\\udf4b" in post.body  # the lemon, as a surrogate pair
    reencoded = json.dumps(post.json(), ensure_ascii=False).encode()
    assert not hmac.compare_digest(
        expected, "sha256=" + hmac.new(APP_SECRET.encode(), reencoded, hashlib.sha256).hexdigest()
    )

    body = post.json()
    assert body["object"] == "instagram"
    entry = body["entry"][0]
    assert entry["id"] == SUNNY
    assert abs(entry["time"] - time.time()) < 120  # seconds for changes
    [change] = entry["changes"]
    assert change["field"] == "comments"
    olga = admin.inbox("olga.petrova")["igsids"][SUNNY]
    assert change["value"] == {
        "from": {"id": olga, "username": "olga.petrova"},
        "media": {"id": LEMON_REEL, "media_product_type": "REELS"},
        "id": made["id"],
        "text": "Хочу RECIPE 🍋 s'il vous plaît",
    }


def test_public_reply_and_fan_reply_events(
    graph: httpx.Client, admin: SandboxAdmin, token: str, receiver: WebhookReceiver
) -> None:
    admin.update_settings(webhook_batch_window_ms=0)
    fan_reply = admin.fan_reply("jane.doe", OLGA_COMMENT, "me too")
    own = graph.post(f"/{OLGA_COMMENT}/replies", params={"access_token": token, "message": "Sent!"})
    posts = receiver.wait_for(2)
    by_id = {c["value"]["id"]: (post, c["value"]) for post in posts for c in changes(post)}
    fan_value = by_id[fan_reply["id"]][1]
    assert fan_value["parent_id"] == OLGA_COMMENT
    assert fan_value["from"]["username"] == "jane.doe"
    # The account's own reply comes back with from.id == entry.id and self_ig_scoped_id.
    own_post, own_value = by_id[own.json()["id"]]
    assert own_value["from"]["id"] == SUNNY
    assert "self_ig_scoped_id" in own_value["from"]
    assert own_post.json()["entry"][0]["id"] == SUNNY


def test_messaging_events_echo_postback_seen(
    graph: httpx.Client, admin: SandboxAdmin, token: str, receiver: WebhookReceiver
) -> None:
    admin.update_settings(webhook_batch_window_ms=0)
    template = {
        "attachment": {
            "type": "template",
            "payload": {
                "template_type": "button",
                "text": "Tap for the recipe",
                "buttons": [{"type": "postback", "title": "Send it", "payload": "reveal:42"}],
            },
        }
    }
    sent = private_reply(graph, token, OLGA_COMMENT, template).json()
    admin.fan_tap("olga.petrova", "sunny.bakes", payload="reveal:42")
    admin.fan_dm("olga.petrova", "sunny.bakes", "Спасибо!")
    admin.fan_seen("olga.petrova", "sunny.bakes")
    posts = receiver.wait_for(4)
    items = [item for post in posts for item in messaging(post)]
    # One POST per event, sent concurrently: arrival order is not guaranteed (nor on Meta).
    [echo] = [i for i in items if i.get("message", {}).get("is_echo")]
    [tap] = [i for i in items if "postback" in i]
    [dm] = [i for i in items if "message" in i and not i["message"].get("is_echo")]
    [seen] = [i for i in items if "read" in i]
    olga = sent["recipient_id"]

    assert echo["sender"] == {"id": SUNNY}
    assert echo["recipient"] == {"id": olga}
    assert echo["message"]["mid"] == sent["message_id"]
    assert echo["message"]["is_echo"] is True
    assert echo["message"]["attachments"][0]["payload"]["template_type"] == "button"
    assert tap["postback"]["payload"] == "reveal:42"
    assert tap["postback"]["title"] == "Send it"
    assert tap["sender"] == {"id": olga}
    assert dm["message"]["text"] == "Спасибо!"
    assert "is_echo" not in dm["message"]
    assert seen["read"] == {"mid": sent["message_id"]}
    for post in posts:
        entry = post.json()["entry"][0]
        assert entry["time"] > 10**12  # milliseconds for messaging
        assert post.signature_valid(APP_SECRET)


def test_batching_combines_events_within_the_window(
    admin: SandboxAdmin, token: str, receiver: WebhookReceiver
) -> None:
    admin.update_settings(webhook_batch_window_ms=1000)
    for n in range(3):
        admin.fan_comment("jane.doe", LEMON_REEL, f"batch {n}")
    admin.fan_dm("jane.doe", "sunny.bakes", "and a DM")
    [post] = receiver.wait_for(1)
    entries = post.json()["entry"]
    assert [c["value"]["text"] for c in changes(post)] == ["batch 0", "batch 1", "batch 2"]
    assert len(entries) == 2
    assert messaging(post)[0]["message"]["text"] == "and a DM"
    admin.update_settings(webhook_batch_window_ms=0)
    admin.fan_comment("jane.doe", LEMON_REEL, "alone 1")
    admin.fan_comment("jane.doe", LEMON_REEL, "alone 2")
    assert len(receiver.wait_for(3)) == 3


def test_flat_form_when_asked(admin: SandboxAdmin, token: str, receiver: WebhookReceiver) -> None:
    admin.update_settings(webhook_flat_form=True)
    admin.fan_comment("jane.doe", LEMON_REEL, "flat please")
    [post] = receiver.wait_for(1)
    entry = post.json()["entry"][0]
    assert entry["field"] == "comments"
    assert entry["value"]["text"] == "flat please"
    assert "changes" not in entry


def test_retry_after_500_then_growing_gaps(
    admin: SandboxAdmin, token: str, receiver: WebhookReceiver
) -> None:
    admin.update_settings(webhook_retry_base_seconds=0.3, webhook_batch_window_ms=0)
    receiver.respond_with(500, 500, 503)
    admin.fan_comment("jane.doe", LEMON_REEL, "retry me")
    posts = receiver.wait_for(4)
    assert [p.status for p in posts] == [500, 500, 503, 200]
    assert len({p.body for p in posts}) == 1  # the same bytes every time
    gaps = [b.received_at - a.received_at for a, b in itertools.pairwise(posts)]
    assert gaps[0] < 0.25  # retried right away
    assert gaps[1] >= 0.28
    assert gaps[2] >= 0.55  # then 0.3 s, 0.6 s
    # The receiver logs a POST before answering it; wait until the sandbox saw the answer.
    wait_until(
        lambda: admin.webhook_events(field="comments")["events"][0]["status"] == "delivered",
        timeout=5,
        what="the event to be marked delivered",
    )
    attempts = admin.webhook_attempts()
    assert [(a["attempt"], a["status"]) for a in attempts] == [
        (1, 500),
        (2, 500),
        (3, 503),
        (4, 200),
    ]
    assert attempts[0]["signature"] == posts[0].headers["x-hub-signature-256"]
    assert attempts[0]["body"].encode() == posts[0].body


def test_timeout_counts_as_failure_and_gives_up_after_max_attempts(
    admin: SandboxAdmin, token: str, receiver: WebhookReceiver
) -> None:
    admin.update_settings(
        webhook_timeout_seconds=0.3,
        webhook_retry_base_seconds=0.05,
        webhook_max_attempts=3,
        webhook_batch_window_ms=0,
    )
    receiver.respond_with(200, delay=1.0)
    receiver.respond_with(500, 500)
    admin.fan_comment("jane.doe", LEMON_REEL, "slow receiver")
    wait_until(
        lambda: admin.webhook_events()["events"][0]["status"] == "failed",
        timeout=10,
        what="the event to be given up",
    )
    attempts = admin.webhook_attempts()
    assert len(attempts) == 3
    assert "Timeout" in (attempts[0]["error"] or "")
    assert [a["status"] for a in attempts[1:]] == [500, 500]


def test_drop_duplicate_and_delay_faults(
    admin: SandboxAdmin, token: str, receiver: WebhookReceiver
) -> None:
    admin.update_settings(webhook_batch_window_ms=0)
    admin.add_fault("webhook", "drop", times=1)
    admin.fan_comment("jane.doe", LEMON_REEL, "dropped")
    admin.add_fault("webhook", "duplicate", count=3, times=1)
    duplicated = admin.fan_comment("jane.doe", LEMON_REEL, "three times")
    posts = receiver.wait_for(3)
    assert [changes(p)[0]["value"]["id"] for p in posts] == [duplicated["id"]] * 3
    statuses = {e["value"]["text"]: e["status"] for e in admin.webhook_events()["events"]}
    assert statuses["dropped"] == "dropped"

    admin.add_fault("webhook", "delay", seconds=30, times=1)
    admin.fan_comment("jane.doe", LEMON_REEL, "held back")
    admin.fan_comment("jane.doe", LEMON_REEL, "on time")
    receiver.wait_for(4)
    assert changes(receiver.posts()[3])[0]["value"]["text"] == "on time"
    assert admin.flush_webhooks()["released"] == 1
    assert changes(receiver.wait_for(5)[4])[0]["value"]["text"] == "held back"


def test_no_subscription_means_no_delivery(admin: SandboxAdmin, receiver: WebhookReceiver) -> None:
    admin.mint_token("sunny.bakes", subscribe=["messages"])
    admin.fan_comment("jane.doe", LEMON_REEL, "nobody listens")
    admin.flush_webhooks()
    assert admin.webhook_events()["events"][0]["status"] == "not_subscribed"
    assert receiver.posts() == []


def test_registration_handshake_and_meta_secret(
    admin: SandboxAdmin, token: str, receiver: WebhookReceiver
) -> None:
    refused = admin.register_webhook(receiver.url, "wrong-token")
    assert refused["verified"] is False
    assert refused["status"] == 403
    try:
        accepted = admin.register_webhook(receiver.url, VERIFY_TOKEN, sign_with="meta")
        assert accepted["verified"] is True
        assert receiver.handshakes[-1]["hub.mode"] == "subscribe"
        admin.fan_comment("jane.doe", LEMON_REEL, "signed with the meta secret")
        [post] = receiver.wait_for(1)
        assert post.signature_valid(META_SECRET)
        assert not post.signature_valid(APP_SECRET)
    finally:
        # The session's sandbox keeps its registration across resets: restore the default.
        admin.register_webhook(receiver.url, VERIFY_TOKEN)
