"""A creator sets up a two-step campaign in Chromium — opening DM, follow gate, follow-up —
watching the preview, and a fan goes through it against real web, worker and sandbox
processes: opening DM, tap, the link once, the follow-up; the delivery log shows each step."""

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


def _set_up_in_the_editor(page: Page, artifacts_dir: Path) -> None:
    page.goto("/campaigns/new")
    page.fill("#name", "Lemon loaf, two steps")
    page.locator(".media-item", has_text="Lemon drizzle loaf").first.click()
    add_keyword(page, "RECIPE")
    page.fill("#dm_text", "Here you go, {username}!")
    page.fill("#button_title_1", "Get the recipe")
    page.fill("#button_url_1", "https://sunny.example/lemon")

    # The section is collapsed until opened; the preview follows each step as it is typed.
    section = page.locator("#two-step")
    expect(section).not_to_have_attribute("open", "")
    section.locator("summary").click()
    page.check("#opening_dm_enabled")
    page.fill("#opening_dm_text", "Want the recipe, {username}? Tap below.")
    page.fill("#opening_dm_button_title", "Send me the link")
    expect(page.locator("#preview-opening")).to_contain_text("Want the recipe, jane.doe?")
    expect(page.locator("#preview-opening .ig-postback")).to_have_text("Send me the link")
    page.check("#follow_gate_enabled")
    page.fill("#follow_prompt_text", "Follow me first, then tap.")
    page.fill("#follow_prompt_button_title", "I'm following")
    expect(page.locator("#preview-prompt .ig-postback")).to_have_text("I'm following")
    page.check("#follow_up_enabled")
    page.fill("#follow_up_text", "Did you bake it, {username}?")
    page.fill("#follow_up_delay_minutes", "0")
    expect(page.locator("#preview-follow-up")).to_contain_text("Did you bake it, jane.doe?")
    expect(page.locator(".ig-step").nth(2)).to_contain_text("After the tap, once they follow you")
    expect(page.locator(".ig-step").nth(3)).to_contain_text("Right after")
    page.screenshot(path=str(artifacts_dir / "two-step-editor.png"), full_page=True)

    page.click("#save-activate")
    expect(page).to_have_url(re.compile(r"/campaigns/\d+\?notice=created$"))
    expect(page.locator("#two-step")).to_have_attribute("open", "")


def _the_log_tells_the_story(page: Page, artifacts_dir: Path) -> None:
    page.goto("/log")
    rows = page.locator("#log-rows tr.log-row")
    expect(rows).to_have_count(4, timeout=WITHIN_MS)
    expect(page.locator("#log-rows .kind", has_text="Button")).to_have_count(2)
    follow_up = page.locator("#log-rows tr.log-row", has_text="Follow-up")
    expect(follow_up).to_have_count(1)
    expect(follow_up).to_contain_text("Did you bake it, jane.doe?")
    page.screenshot(path=str(artifacts_dir / "two-step-log.png"), full_page=True)
    follow_up.locator("a.log-open").click()
    timeline = page.locator("#timeline")
    expect(timeline.locator("#ledger h2")).to_have_text("The follow-up")
    expect(timeline).to_contain_text("follows delivery #")
    expect(timeline.locator("#message-kind")).to_have_text("The follow-up")
    timeline.locator("#ledger a", has_text="delivery #").click()
    expect(page.locator("#ledger h2")).to_have_text("The button that was tapped")
    expect(page.locator("#message-kind")).to_have_text("The link")
    expect(page.locator("#timeline")).to_contain_text("sent the link: follows the account")
    page.screenshot(path=str(artifacts_dir / "two-step-timeline.png"), full_page=True)


def test_a_two_step_campaign_from_the_editor_to_the_fans_inbox(
    connected: Connected,
    sandbox: SandboxProcess,
    worker: Service,
    db_url: str,
    artifacts_dir: Path,
) -> None:
    page = connected.page
    _set_up_in_the_editor(page, artifacts_dir)
    wait_past_activation(db_url)

    # jane.doe follows @sunny.bakes in the seed world; she taps the opening DM's button twice.
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
        lambda: len(admin.inbox("jane.doe")["messages"]) == 3,
        timeout=WITHIN_MS / 1000,
        what="the link and the follow-up",
    )
    inbox = admin.inbox("jane.doe")["messages"]
    assert [m["kind"] for m in inbox] == ["private_reply", "dm", "dm"]
    [button] = inbox[1]["attachment"]["payload"]["buttons"]
    assert destination_of(button["url"]) == "https://sunny.example/lemon"
    assert inbox[2]["text"] == "Did you bake it, jane.doe?"
    _the_log_tells_the_story(page, artifacts_dir)
