"""A creator sets up a campaign on replies to one of their stories, in Chromium, against real
web, worker and sandbox processes; a fan replies to the story on the sandbox's fan page, the
open log shows the story reply turn SENT, and the fan's inbox holds exactly one DM with the
link."""

from __future__ import annotations

import re

from playwright.sync_api import Browser, expect

from tests.e2e.flows import Connected, add_keyword
from tests.support.dashboard import SUNNY
from tests.support.log_data import wait_past_activation
from tests.support.processes import Service, wait_until
from tests.support.sandbox_process import SandboxProcess

# What the worker does (a webhook to a sent DM) takes a second or two; a loaded two-core machine
# can stretch that tenfold, and only a stuck pipeline should fail.
DELIVERED_WITHIN_MS = 60_000
STORY_CAPTION = "Reply LOAF for the recipe"
RECIPE = "https://sunny.example/lemon"


def test_a_story_reply_campaign_answers_the_fans_reply_once(
    connected: Connected,
    sandbox: SandboxProcess,
    worker: Service,
    db_url: str,
    browser: Browser,
) -> None:
    story = sandbox.admin.publish_story("sunny.bakes", STORY_CAPTION)
    page = connected.page
    page.goto("/campaigns/new")
    page.fill("#name", "Story loaf")
    page.get_by_label("Replies to my stories").check()
    # The post picker and public replies belong to comment campaigns.
    expect(page.locator(".comments-only").first).to_be_hidden()
    expect(page.locator("#story-picker")).to_be_hidden()
    page.get_by_label("One story, while it is live").check()
    picked = page.locator("#story-picker .media-item", has_text=STORY_CAPTION)
    expect(picked).to_be_visible()
    picked.click()
    add_keyword(page, "LOAF")
    page.fill("#dm_text", "Here is the recipe, {username}!")
    page.fill("#button_title_1", "Get the recipe")
    page.fill("#button_url_1", RECIPE)
    page.click("#save-activate")
    expect(page).to_have_url(re.compile(r"/campaigns/\d+\?notice=created$"))
    wait_past_activation(db_url)

    page.goto("/campaigns")
    expect(page.locator("table")).to_contain_text("Replies to one story")
    page.goto("/log")
    page.select_option("#trigger", "story_reply")
    expect(page).to_have_url(re.compile(r"/log\?trigger=story_reply$"))

    # The fan, in a browser of their own, replies to the story on the sandbox's fan page.
    fan = browser.new_context()
    feed = fan.new_page()
    feed.goto(f"{sandbox.base_url}/fan?fan=jane.doe")
    story_card = feed.locator(f'[data-story="{story["id"]}"]')
    story_card.locator('input[name="text"]').fill("LOAF please 🍞")
    story_card.get_by_role("button", name="Send").click()
    expect(feed.locator(".notice")).to_contain_text("Reply sent to @sunny.bakes's story")

    row = page.locator("#log-rows tr.log-row")
    expect(row).to_have_count(1, timeout=DELIVERED_WITHIN_MS)
    expect(row.locator(".kind")).to_have_text("Story reply")
    expect(row).to_contain_text("LOAF please 🍞")
    expect(row.locator(".leg-pr .state")).to_have_attribute(
        "data-state", "SENT", timeout=DELIVERED_WITHIN_MS
    )

    inbox = fan.new_page()
    inbox.goto(f"{sandbox.base_url}/fan/inbox?fan=jane.doe&account={SUNNY}")
    expect(inbox.locator("#thread")).to_contain_text("Replied to their story")
    expect(inbox.locator("#thread")).to_contain_text("Here is the recipe")
    expect(inbox.locator("#thread a", has_text="Get the recipe")).to_have_attribute(
        "href", re.compile(r"/go/")
    )
    fan.close()

    # Exactly one DM: the reply's, by IGSID, no private reply.
    wait_until(
        lambda: len(sandbox.admin.inbox("jane.doe")["messages"]) >= 1,
        timeout=DELIVERED_WITHIN_MS / 1000,
        what="the DM in jane.doe's inbox",
    )
    received = sandbox.admin.inbox("jane.doe")["messages"]
    assert [(m["kind"], m["comment_id"]) for m in received] == [("dm", None)]
