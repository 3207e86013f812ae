"""A refused sign-up or sign-in puts the caret in the field to fix, keeps what was typed, and
the keyboard alone finishes the job (type, Enter)."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from tests.e2e.flows import sign_out
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
