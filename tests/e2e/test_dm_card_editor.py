"""A creator gives a two-step campaign a card with an image in Chromium, watching the preview
draw it, and a fan gets the card after tapping — once — from real web, worker and sandbox
processes; the log's timeline names the card."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.sync_api import Page, expect

from tests.e2e.flows import Connected, add_keyword
from tests.support.dashboard import LEMON_REEL
from tests.support.links import destination_of
from tests.support.log_data import wait_past_activation
from tests.support.processes import Service, wait_until
from tests.support.sandbox_process import SandboxProcess

# What the worker does (a webhook to a sent DM) takes a second or two; a loaded two-core machine
# can stretch that tenfold, and only a stuck pipeline should fail.
WITHIN_MS = 60_000


def _set_up_in_the_editor(page: Page, media: str, artifacts_dir: Path) -> None:
    page.goto("/campaigns/new")
    page.fill("#name", "Lemon loaf card")
    page.locator(".media-item", has_text="Lemon drizzle loaf").first.click()
    add_keyword(page, "RECIPE")
    page.fill("#dm_text", "Here you go, {username}!")
    page.fill("#button_title_1", "Get the recipe")
    page.fill("#button_url_1", "https://sunny.example/lemon")
    page.locator("#two-step summary").click()
    page.check("#opening_dm_enabled")
    page.fill("#opening_dm_text", "Want the recipe, {username}? Tap below.")
    page.fill("#opening_dm_button_title", "Send me the link")

    # A link that is not an image is refused when saving, next to the field.
    page.fill("#dm_image_url", f"{media}/page.html")
    page.check("#card_enabled")
    page.fill("#card_title", "t" * 81)
    expect(page.locator("#preview-card-title-error")).to_contain_text("at most 80 characters")
    page.fill("#card_title", "Your lemon loaf, {username}")
    page.fill("#card_subtitle", "20 minutes, one bowl")
    card = page.locator("#preview-card")
    expect(card).to_contain_text("Your lemon loaf, jane.doe")
    expect(card.locator(".ig-button")).to_have_text("Get the recipe")
    page.click("#save-activate")
    expect(page.locator("#error-dm_image_url")).to_contain_text("not a JPEG, PNG or GIF image")

    page.fill("#dm_image_url", f"{media}/cover.png")
    expect(page.locator("#preview-card img")).to_have_attribute("src", f"{media}/cover.png")
    page.screenshot(path=str(artifacts_dir / "dm-card-editor.png"), full_page=True)
    page.click("#save-activate")
    expect(page).to_have_url(re.compile(r"/campaigns/\d+\?notice=created$"))
    expect(page.locator("#card_enabled")).to_be_checked()


def test_a_card_from_the_editor_to_the_fans_inbox(
    connected: Connected,
    sandbox: SandboxProcess,
    worker: Service,
    db_url: str,
    artifacts_dir: Path,
) -> None:
    page = connected.page
    media = f"{sandbox.base_url}/_media"
    _set_up_in_the_editor(page, media, artifacts_dir)
    wait_past_activation(db_url)

    admin = sandbox.admin
    admin.fan_comment("jane.doe", LEMON_REEL, "RECIPE please")
    wait_until(
        lambda: len(admin.inbox("jane.doe")["messages"]) == 1,
        timeout=WITHIN_MS / 1000,
        what="the opening DM",
    )
    admin.fan_tap("jane.doe", "sunny.bakes")
    admin.fan_tap("jane.doe", "sunny.bakes")
    wait_until(
        lambda: len(admin.inbox("jane.doe")["messages"]) == 2,
        timeout=WITHIN_MS / 1000,
        what="the card",
    )
    inbox = admin.inbox("jane.doe")["messages"]
    assert [m["kind"] for m in inbox] == ["private_reply", "dm"]
    assert inbox[0]["attachment"]["payload"]["template_type"] == "button"
    [element] = inbox[1]["attachment"]["payload"]["elements"]
    assert element["title"] == "Your lemon loaf, jane.doe"
    assert element["image_url"] == f"{media}/cover.png"
    assert destination_of(element["buttons"][0]["url"]) == "https://sunny.example/lemon"

    page.goto("/log")
    # Both taps are rows; the second one's is skipped (this person already got the link).
    expect(page.locator("#log-rows tr.log-row", has_text="Button")).to_have_count(
        2, timeout=WITHIN_MS
    )
    # The worker records SENT after Instagram took the card; the open log shows it on a poll.
    tap = page.locator('#log-rows tr.log-row[data-state="SENT"]', has_text="Button")
    expect(tap).to_have_count(1, timeout=WITHIN_MS)
    tap.locator("a.log-open").click()
    expect(page.locator("#timeline")).to_contain_text("card")
    page.screenshot(path=str(artifacts_dir / "dm-card-timeline.png"), full_page=True)
    # The second tap made nothing new: one card in the inbox.
    assert len(admin.inbox("jane.doe")["messages"]) == 2
