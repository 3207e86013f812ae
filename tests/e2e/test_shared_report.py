"""A shared report in Chromium: the owner makes a link on the campaign page (htmx swaps the
card in place), copies it, a stranger's phone opens it without signing in and without a
cookie, and once the owner revokes it the same address shows the friendly 404 page.
"""

from __future__ import annotations

import re

from playwright.sync_api import Browser, expect

from tests.e2e.conftest import CDN_PATTERN
from tests.e2e.flows import Connected, create_campaign

PHONE = {"width": 390, "height": 844}


def test_an_owner_shares_a_report_a_stranger_opens_it_and_a_revoke_closes_it(
    connected: Connected, browser: Browser, base_url: str
) -> None:
    owner = connected.page
    owner.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=base_url)
    campaign_id = create_campaign(owner, name="Lemon loaf recipe")
    expect(owner.locator("#no-report-links")).to_be_visible()

    owner.click("#create-report-link")
    expect(owner.locator("#new-report-link")).to_be_visible()
    # Swapped in place: the page did not move.
    assert re.search(rf"/campaigns/{campaign_id}\?notice=created$", owner.url)
    owner.click("#copy-report-link")
    expect(owner.locator("#copy-report-link")).to_have_text("Copied")
    link: str = owner.evaluate("navigator.clipboard.readText()")
    assert link == owner.locator("#new-report-url").input_value()
    assert re.fullmatch(rf"{re.escape(base_url)}/r/[A-Za-z0-9_-]{{43}}", link)
    expect(owner.locator("#report-links-list tbody tr")).to_have_count(1)

    stranger = browser.new_context(base_url=base_url, viewport=PHONE)
    try:
        phone = stranger.new_page()
        phone.route(CDN_PATTERN, lambda route: route.abort())
        phone.goto(link)
        expect(phone.locator("#report-campaign")).to_have_text("Lemon loaf recipe")
        expect(phone.locator("#funnel")).to_be_visible()
        expect(phone.locator("#report-charts svg").first).to_be_visible()
        assert stranger.cookies() == []
        fits = phone.evaluate(
            "document.documentElement.scrollWidth <= document.documentElement.clientWidth"
        )
        assert fits, "the report is wider than a 390 px phone"
        # The range switch is a plain link back to the report.
        phone.click('#report-charts [data-range="24h"]')
        expect(phone.locator('#report-charts [data-range="24h"]')).to_have_class("active")
        assert phone.url == f"{link}?range=24h"

        owner.click("#report-links-list [data-action=revoke-report]")
        expect(owner.locator("#no-report-links")).to_be_visible()
        expect(owner.locator("#new-report-link")).to_have_count(0)

        phone.goto(link)
        expect(phone.locator("#report-not-found")).to_be_visible()
        expect(phone.locator("body")).not_to_contain_text("Lemon loaf recipe")
        assert stranger.cookies() == []
    finally:
        stranger.close()
