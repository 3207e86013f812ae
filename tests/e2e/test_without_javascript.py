"""A creator whose browser runs no JavaScript: the campaign editor says why no post is listed
(instead of "Loading posts…" for ever) and what to choose instead, and a campaign is still
created with the plain form."""

from __future__ import annotations

import re

from playwright.sync_api import Browser, expect

from tests.e2e.flows import Connected, sign_in


def test_the_editor_without_javascript_explains_the_post_picker_and_saves(
    connected: Connected, browser: Browser, base_url: str
) -> None:
    context = browser.new_context(base_url=base_url, java_script_enabled=False)
    try:
        page = context.new_page()
        sign_in(page, "creator@example.com")
        page.goto("/campaigns/new")
        expect(page.locator("#media-picker-noscript")).to_be_visible()
        expect(page.locator("#media-picker-noscript")).to_contain_text("choose “Any post”")
        expect(page.get_by_text("Loading posts…")).to_be_hidden()
        expect(page.get_by_text("checking…")).to_be_hidden()  # the header's health badge
        expect(page.get_by_text("Your DM appears here as you type.")).to_be_hidden()
        expect(page.locator("#preview-noscript")).to_be_visible()

        page.fill("#name", "Any-post recipe")
        page.check("input[name=scope][value=any_post]")
        page.fill("#keywords_entry", "RECIPE")  # no script makes chips: the entry is kept
        page.fill("#dm_text", "Hi {username}! Here is the recipe: {link}")
        page.fill("#button_title_1", "Get the recipe")
        page.fill("#button_url_1", "https://sunny.example/lemon")
        page.click("#save-campaign")
        expect(page).to_have_url(re.compile(r"/campaigns/\d+\?notice=created$"))
        expect(page.locator("#editor-notice")).to_have_text("Campaign created.")

        page.goto("/campaigns/try")
        expect(page.get_by_text("Loading posts…")).to_be_hidden()
        page.fill("#comment", "RECIPE please")
        page.click("#try-run")
        expect(page.locator("#try-result")).to_contain_text("Any-post recipe")
    finally:
        context.close()
