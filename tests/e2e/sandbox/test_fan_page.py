"""A person plays a fan in Chromium: the comment they post reaches the callback, signed."""

from __future__ import annotations

import httpx
from playwright.sync_api import Page, expect

from tests.support.sandbox_process import SandboxProcess, WebhookReceiver

SUNNY = "17841458120395731"
LEMON_REEL = "17918195224117851"


def test_fan_comments_through_the_page_and_the_callback_gets_the_signed_event(
    page: Page, fresh: SandboxProcess, receiver: WebhookReceiver, app_secret: str
) -> None:
    fresh.admin.mint_token("sunny.bakes", subscribe=["comments"])

    page.goto("/fan")
    page.get_by_role("link", name="@yamada.hanako").click()
    page.locator(f"[data-media='{LEMON_REEL}']").click()
    expect(page.get_by_role("heading", name="comments")).to_be_visible()
    page.get_by_label("Comment").fill("RECIPE お願いします 🍋")
    page.get_by_role("button", name="Post").click()
    expect(page.locator("#comments")).to_contain_text("RECIPE お願いします 🍋")

    [post] = receiver.wait_for(1)
    assert post.signature_valid(app_secret)
    assert b"\\u304a\\u9858\\u3044" in post.body  # お願い, escaped as Meta does
    [entry] = post.json()["entry"]
    assert entry["id"] == SUNNY
    value = entry["changes"][0]["value"]
    assert value["text"] == "RECIPE お願いします 🍋"
    assert value["from"]["username"] == "yamada.hanako"
    assert value["media"] == {"id": LEMON_REEL, "media_product_type": "REELS"}


def test_fan_taps_a_button_in_the_inbox(
    page: Page, fresh: SandboxProcess, receiver: WebhookReceiver, app_secret: str
) -> None:
    token = fresh.admin.mint_token("sunny.bakes", subscribe=["messaging_postbacks"])["access_token"]
    comment = fresh.admin.fan_comment("zoe.lefevre", LEMON_REEL, "RECIPE")
    sent = httpx.post(
        f"{fresh.graph_base}/me/messages",
        params={"access_token": token},
        json={
            "recipient": {"comment_id": comment["id"]},
            "message": {
                "attachment": {
                    "type": "template",
                    "payload": {
                        "template_type": "button",
                        "text": "Tap and I'll send the recipe",
                        "buttons": [
                            {
                                "type": "postback",
                                "title": "Send the recipe",
                                "payload": "reveal:77",
                            },
                            {"type": "web_url", "title": "Blog", "url": "https://sunny.example"},
                        ],
                    },
                }
            },
        },
    )
    assert sent.status_code == 200

    page.goto(f"/fan/inbox?fan=zoe.lefevre&account={SUNNY}")
    expect(page.locator("#thread")).to_contain_text("Tap and I'll send the recipe")
    expect(page.get_by_role("link", name="Blog ↗")).to_be_visible()
    page.get_by_role("button", name="Send the recipe").click()

    [post] = receiver.wait_for(1)
    assert post.signature_valid(app_secret)
    postback = post.json()["entry"][0]["messaging"][0]["postback"]
    assert (postback["title"], postback["payload"]) == ("Send the recipe", "reveal:77")
