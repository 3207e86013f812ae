"""A creator whose browser runs no JavaScript: the campaign editor says why no post is listed
(instead of "Loading posts…" for ever) and what to choose instead, and a campaign is still
created with the plain form; one for a single post too, its posts asked for by the form."""

from __future__ import annotations

import re

import psycopg
from playwright.sync_api import Browser, expect

from app.web.campaigns.media import MEDIA_PAGE_SIZE
from tests.e2e.flows import LEMON_CAPTION, Connected, sign_in
from tests.support.dashboard import LEMON_REEL
from tests.support.sandbox_process import SandboxProcess


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


def test_a_campaign_for_one_post_is_set_up_without_javascript(
    connected: Connected, browser: Browser, base_url: str, sandbox: SandboxProcess, db_url: str
) -> None:
    # Twelve newer posts fill the first page: the lemon reel is on the second.
    for n in range(MEDIA_PAGE_SIZE):
        sandbox.admin.publish_media("sunny.bakes", f"Sourdough day {n + 1}")
    context = browser.new_context(base_url=base_url, java_script_enabled=False)
    try:
        page = context.new_page()
        sign_in(page, "creator@example.com")
        page.goto("/campaigns/new")
        page.fill("#name", "Lemon loaf, no script")
        page.check("input[name=scope][value=post]")
        page.fill("#keywords_entry", "RECIPE")
        page.fill("#dm_text", "Hi {username}! Here is the recipe: {link}")
        expect(page.locator(".media-item")).to_have_count(0)

        # The form asks for the chosen account's posts: nothing is saved, nothing typed lost.
        page.click("#show-posts")
        expect(page).to_have_url(re.compile(r"/campaigns$"))
        items = page.locator("#media-picker .media-item")
        expect(items).to_have_count(MEDIA_PAGE_SIZE)
        expect(items.first).to_contain_text("Sourdough day 12")
        expect(page.locator("#media-picker")).not_to_contain_text(LEMON_CAPTION)
        expect(page.locator("#name")).to_have_value("Lemon loaf, no script")
        expect(page.locator("#dm_text")).to_have_value("Hi {username}! Here is the recipe: {link}")
        expect(page.locator("input[name=scope][value=post]")).to_be_checked()
        assert _campaigns(db_url) == []

        page.get_by_role("button", name="More posts").click()
        lemon = page.locator("#media-picker .media-item", has_text=LEMON_CAPTION)
        expect(lemon).to_be_visible()
        lemon.click()
        expect(lemon.locator("input[type=radio]")).to_be_checked()
        expect(page.locator("#name")).to_have_value("Lemon loaf, no script")
        page.fill("#button_title_1", "Get the recipe")
        page.fill("#button_url_1", "https://sunny.example/lemon")
        page.click("#save-campaign")
        expect(page).to_have_url(re.compile(r"/campaigns/\d+\?notice=created$"))
        expect(page.locator("#editor-notice")).to_have_text("Campaign created.")
        # Saved for that post, with what was typed before the posts were asked for.
        [(name, scope, media_id, caption, keywords)] = _campaigns(db_url)
        assert (name, scope, media_id) == ("Lemon loaf, no script", "post", LEMON_REEL)
        assert caption.startswith(LEMON_CAPTION)
        assert keywords == ["RECIPE"]
        # Its page names the post it watches.
        expect(page.locator("input[name=scope][value=post]")).to_be_checked()
        expect(page.locator("#media-picker input[name=media_id]")).to_have_value(LEMON_REEL)

        # Enter in a field still saves, though the post list's button comes first in the form.
        page.fill("#name", "Lemon loaf, renamed")
        page.press("#name", "Enter")
        expect(page.locator("#editor-notice")).to_have_text("Saved.")
        assert _campaigns(db_url)[0][:3] == ("Lemon loaf, renamed", "post", LEMON_REEL)
    finally:
        context.close()


def _campaigns(db_url: str) -> list[tuple[str, str, str | None, str, list[str]]]:
    with psycopg.connect(db_url) as conn:
        rows = conn.execute(
            "SELECT name, scope::text, media_id, coalesce(media_caption, ''), keywords"
            " FROM campaigns ORDER BY id"
        ).fetchall()
    return [(r[0], r[1], r[2], r[3], list(r[4])) for r in rows]
