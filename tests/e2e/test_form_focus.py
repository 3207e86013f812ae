"""A refused form puts the caret in the field to fix and keeps what was typed: sign-up and
sign-in, where the keyboard alone then finishes the job (type, Enter), and the campaign
editor, whose save button sits at the foot of a long form far below the fields it refused."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from tests.e2e.flows import Connected, add_keyword, sign_out
from tests.support.dashboard import PASSWORD


def test_a_refused_password_gets_the_caret_on_sign_up_and_on_sign_in(page: Page) -> None:
    page.goto("/signup")
    page.fill("#email", "maya@example.com")
    page.fill("#password", "short")
    page.fill("#workspace", "Maya's Kitchen")
    page.press("#workspace", "Enter")

    password = page.locator("#password")
    expect(page.locator("#password-error")).to_have_text(re.compile("at least 10 characters"))
    expect(password).to_be_focused()
    expect(password).to_have_attribute("aria-invalid", "true")
    expect(password).to_have_attribute("aria-describedby", "password-error")
    expect(page.locator("#email")).to_have_value("maya@example.com")
    expect(page.locator("#email")).not_to_have_attribute("aria-invalid", "true")
    expect(page.locator("#workspace")).to_have_value("Maya's Kitchen")

    page.keyboard.type(PASSWORD)
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"/accounts\?welcome=1$"))

    sign_out(page)
    page.fill("#email", "maya@example.com")
    page.fill("#password", "not the password")
    page.press("#password", "Enter")
    expect(page.locator("#login-error")).to_be_visible()
    expect(page.locator("#email")).to_have_value("maya@example.com")
    expect(page.locator("#password")).to_be_focused()
    page.keyboard.type(PASSWORD)
    page.keyboard.press("Enter")
    expect(page.locator("details.user-menu")).to_be_visible()


def test_a_refused_campaign_save_brings_the_first_field_to_fix_into_view(
    connected: Connected,
) -> None:
    page = connected.page
    htmx_errors: list[str] = []
    page.on("console", lambda m: htmx_errors.append(m.text) if "hx-" in m.text else None)
    page.goto("/campaigns/new")
    expect(page.locator(".media-item").first).to_be_visible()
    page.fill("#name", "Half done")
    page.locator(".media-item").first.click()
    page.locator("#save-activate").focus()
    page.keyboard.press("Enter")  # the keyboard at the foot of the form: no keyword, no DM

    expect(page.locator("#editor-notice")).to_contain_text("Nothing was saved")
    keywords = page.locator("#keywords_entry")
    expect(keywords).to_be_focused()
    expect(keywords).to_be_in_viewport()
    expect(page.locator("#name")).to_have_value("Half done")

    add_keyword(page, "RECIPE")
    page.fill("#dm_text", "Hi {username}! Here is the recipe.")
    page.click("#save-activate")
    expect(page).to_have_url(re.compile(r"/campaigns/\d+\?notice=created$"))
    # The preview, chips and picker asked nothing of the form's own attributes on the way.
    assert htmx_errors == []
