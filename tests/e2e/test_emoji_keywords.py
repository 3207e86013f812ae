"""Emoji keywords and number codes in Chromium: typed as chips in the editor, refused when they
can never match, and explained by Try a comment."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.e2e.flows import Connected, add_keyword, create_campaign


def test_emoji_and_code_keywords_from_the_editor_to_try_a_comment(connected: Connected) -> None:
    page = connected.page
    create_campaign(page, name="Fire", keyword="🔥", activate=True)
    create_campaign(page, name="Code", keyword="2024", activate=True)

    # A keyword with nothing to match is refused right at its chip.
    page.goto("/campaigns/new")
    entry = page.locator("#keywords_entry")
    entry.fill("?!")
    entry.press("Enter")
    expect(page.locator('[data-error-for="keywords"]')).to_contain_text(
        "has no letters, digits or emoji"
    )
    add_keyword(page, "👨‍👩‍👧")

    page.goto("/campaigns/try")
    page.locator(".media-item").first.click()

    def try_comment(text: str) -> None:
        page.fill("#comment", text)
        page.click("#try-run")

    try_comment("🔥🔥 want it")
    outcome = page.locator("#try-outcome")
    expect(outcome).to_have_attribute("data-matched", "yes")
    expect(outcome.locator("h2")).to_have_text("“Fire” would send the DM")

    try_comment("code 2O24 please")
    expect(outcome.locator("h2")).to_have_text("“Code” would send the DM")
    expect(outcome).to_contain_text("“2O24” in the comment was read as 2024")

    try_comment("code 12O245")
    expect(outcome).to_have_attribute("data-matched", "no")
