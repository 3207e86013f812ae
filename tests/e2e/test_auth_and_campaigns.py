"""A creator's first hour in Chromium: sign up, connect Instagram through the sandbox consent
page, create a campaign on a post, and the ways that can go wrong — double submits, invalid
fields, a declined consent, a forged callback, another workspace's URLs, signing out.
"""

from __future__ import annotations

import re
from typing import Any

import psycopg
from playwright.sync_api import Browser, Page, expect

from tests.e2e.flows import (
    Connected,
    SignedIn,
    add_keyword,
    connect_instagram,
    create_campaign,
    sign_out,
    sign_up,
)


def _rows(db_url: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(db_url) as conn:
        return list(conn.execute(sql, params).fetchall())


def test_sign_up_connect_and_create_a_campaign_on_a_post(signed_in: SignedIn, db_url: str) -> None:
    page = signed_in.page
    expect(page.locator("details.user-menu summary")).to_contain_text("Sunny Bakes")
    connected = connect_instagram(page, "sunny.bakes")

    card = page.locator(f"#account-{connected.account_id}")
    expect(card.locator("[data-field=status]")).to_have_text("Active")
    expect(card.locator("[data-field=token]")).to_contain_text(
        re.compile(r"expires in (59|60) days")
    )
    expect(card.locator("[data-field=webhooks]")).to_contain_text("subscribed")

    page.click("nav >> text=Campaigns")
    page.click("#new-campaign")
    page.fill("#name", "Lemon loaf recipe")
    # The picker shows the account's posts, newest first, straight from the Graph API.
    posts = page.locator(".media-item")
    expect(posts).to_have_count(6)
    expect(posts.first).to_contain_text("Lemon drizzle loaf")
    posts.first.click()
    expect(posts.first.locator("input[type=radio]")).to_be_checked()

    add_keyword(page, "RECIPE")
    add_keyword(page, "recipe please")
    page.locator("#dm_text").press_sequentially("Hi {username}! Here you go: {link}", delay=5)
    bubble = page.locator("#preview-text")
    expect(bubble).to_have_text("Hi jane.doe! Here you go:")  # no buttons yet: plain text
    page.fill("#button_title_1", "Get the recipe")
    page.fill("#button_url_1", "https://sunny.example/lemon")
    expect(page.locator(".ig-button")).to_have_text("Get the recipe")
    expect(page.locator("#preview-counter")).to_contain_text("/ 640 characters")

    page.click("#save-campaign")
    expect(page).to_have_url(re.compile(r"/campaigns/\d+\?notice=created$"))
    expect(page.locator("#editor-notice")).to_have_text("Campaign created.")
    # Said where the page opens, above the campaign's numbers, with what to do next.
    expect(page.locator("#editor-notice")).to_be_in_viewport()
    expect(page.locator("#created-next")).to_contain_text(
        "answers nothing until you press Activate"
    )
    expect(page.locator("#campaign-status")).to_have_text("draft")

    page.click("nav >> text=Campaigns")
    row = page.locator("#campaign-list tbody tr")
    expect(row).to_have_count(1)
    expect(row).to_contain_text("Lemon loaf recipe")
    expect(row).to_contain_text("Lemon drizzle loaf")
    expect(row.locator(".chip")).to_have_text(["RECIPE", "recipe please"])

    [(media_id, caption, keywords, buttons)] = _rows(
        db_url, "SELECT media_id, media_caption, keywords, buttons FROM campaigns"
    )
    assert media_id == "17918195224117851"
    assert caption.startswith("Lemon drizzle loaf")
    assert keywords == ["RECIPE", "recipe please"]
    assert buttons == [{"title": "Get the recipe", "url": "https://sunny.example/lemon"}]

    row.locator("button[data-action=activate]").click()
    expect(page.locator("#campaign-list tbody tr")).to_have_attribute("data-status", "active")


def test_saving_twice_saves_once(connected: Connected, db_url: str) -> None:
    page = connected.page
    campaign_id = create_campaign(page)
    expect(page.locator("#campaign-version")).to_have_text("version 1")

    # A double-click on "Save campaign" is one save.
    page.fill("#name", "Lemon loaf v2")
    page.dblclick("#save-campaign")
    expect(page).to_have_url(re.compile(rf"/campaigns/{campaign_id}\?notice=saved$"))
    expect(page.locator("#campaign-version")).to_have_text("version 2")

    # Two submissions of the same form (same one-time token) racing to the server: one save,
    # and both get the same answer.
    page.fill("#name", "Lemon loaf v3")
    answers = page.evaluate(
        """async () => {
            const form = document.querySelector('#campaign-form');
            const send = () => fetch(form.action, {
                method: 'POST', body: new URLSearchParams(new FormData(form)), redirect: 'manual',
            }).then(r => r.type + ':' + r.status);
            return Promise.all([send(), send()]);
        }"""
    )
    assert answers == ["opaqueredirect:0", "opaqueredirect:0"]
    page.goto(f"/campaigns/{campaign_id}")
    expect(page.locator("#campaign-version")).to_have_text("version 3")
    assert _rows(db_url, "SELECT name, version FROM campaigns") == [("Lemon loaf v3", 3)]
    assert _rows(db_url, "SELECT count(*) FROM idempotency_keys WHERE scope = 'campaign.save'") == [
        (2,)
    ]


def test_invalid_fields_show_their_errors_next_to_them(connected: Connected, db_url: str) -> None:
    page = connected.page
    page.goto("/campaigns/new")
    page.fill("#name", "")
    page.fill("#dm_text", "🍋" * 251)
    page.fill("#button_title_2", "A button title that is far too long")
    page.fill("#button_url_2", "http://not-https.example")
    page.fill("#priority", "5000")
    page.click("#save-campaign")

    expect(page.locator("#editor-notice")).to_contain_text("Nothing was saved")
    expect(page.locator("[data-error-for=name]")).to_contain_text("Give the campaign a name")
    expect(page.locator(".has-error #name")).to_be_visible()
    expect(page.locator("[data-error-for=button_2]")).to_contain_text("at most 20 characters")
    expect(page.locator("[data-error-for=priority]")).to_contain_text("between −1000 and 1000")
    # With a button the DM is a template: 251 emoji are 251 of 640 characters, which is fine.
    expect(page.locator("[data-error-for=dm_text]")).to_have_count(0)
    expect(page).to_have_url(re.compile(r"/campaigns/new$"))  # swapped in place, not navigated
    assert _rows(db_url, "SELECT count(*) FROM campaigns") == [(0,)]

    # Fixing the fields and saving works from the same page. A fixed field stops looking
    # wrong as soon as it is changed; the others stay marked until they are.
    page.fill("#name", "Fixed")
    expect(page.locator("[data-error-for=name]")).to_have_count(0)
    expect(page.locator(".has-error #name")).to_have_count(0)
    expect(page.locator("[data-error-for=priority]")).to_be_visible()
    page.fill("#dm_text", "Here is the recipe 🍋")
    page.fill("#button_title_2", "")
    page.fill("#button_url_2", "")
    page.fill("#priority", "0")
    page.click("#save-campaign")
    expect(page).to_have_url(re.compile(r"/campaigns/\d+\?notice=created$"))


def test_byte_limit_for_plain_text(connected: Connected) -> None:
    page = connected.page
    page.goto("/campaigns/new")
    page.fill("#name", "Emoji")
    page.fill("#dm_text", "🍋" * 251)  # 251 characters but 1004 bytes
    expect(page.locator("#preview-error")).to_contain_text("1004 of 1000 bytes")
    page.click("#save-campaign")
    expect(page.locator("[data-error-for=dm_text]")).to_contain_text("1004 of 1000 bytes")


def test_a_declined_consent_and_a_forged_state_come_back_with_a_message(
    signed_in: SignedIn, db_url: str
) -> None:
    page = signed_in.page
    connect_instagram(page, "sunny.bakes", allow=False)
    expect(page.locator("#connect-problem")).to_contain_text("You declined")

    page.goto("/accounts/instagram/callback?code=AQBforged&state=not-the-state-we-sent")
    expect(page.locator("#connect-problem")).to_contain_text("could not be verified")
    assert _rows(db_url, "SELECT count(*) FROM instagram_accounts") == [(0,)]


def test_another_workspace_cannot_open_these_pages(
    connected: Connected, browser: Browser, base_url: str
) -> None:
    campaign_id = create_campaign(connected.page)
    other = browser.new_context(base_url=base_url)
    try:
        rival = other.new_page()
        sign_up(rival, "rival@example.com")
        for path in (
            f"/campaigns/{campaign_id}",
            f"/accounts/{connected.account_id}",
        ):
            response = rival.goto(path)
            assert response is not None
            assert response.status == 404
            expect(rival.locator("h1")).to_have_text("Not found")
        rival.goto("/campaigns")
        expect(rival.locator("#campaign-list")).to_have_count(0)
    finally:
        other.close()


def test_signing_out_ends_the_session(signed_in: SignedIn, page: Page) -> None:
    page.goto("/campaigns")
    expect(page.locator("h1")).to_have_text("Campaigns")
    sign_out(page)
    page.go_back()
    page.reload()
    expect(page).to_have_url(re.compile(r"/login"))
    page.goto("/campaigns")
    expect(page).to_have_url(re.compile(r"/login\?next=/campaigns$"))
    expect(page.locator("details.user-menu")).to_have_count(0)
