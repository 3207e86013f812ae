"""A second person in Chromium: the owner invites them by link, they create their account from
it and see the workspace read-only, then the owner makes them an admin and they can edit.
"""

from __future__ import annotations

import re
from typing import Any

import psycopg
from playwright.sync_api import Browser, Page, expect

from tests.e2e.conftest import CDN_PATTERN
from tests.e2e.flows import Connected, arrived, create_campaign
from tests.support.dashboard import PASSWORD

HELPER = "helper@example.com"


def _rows(db_url: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(db_url) as conn:
        return list(conn.execute(sql, params).fetchall())


def _invite_and_copy_the_link(owner: Page, base_url: str, email: str) -> str:
    """On the Team page: invite `email` as member, press Copy; returns the clipboard."""
    owner.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=base_url)
    owner.click("nav >> text=Team")
    arrived(owner, re.compile(r"/team$"))
    expect(owner.locator("h1")).to_have_text("Team")
    owner.fill("#invite-email", email)
    owner.select_option("#invite-role", "member")
    owner.click("#send-invite")
    expect(owner.locator("#new-invite")).to_be_visible()
    owner.click("#copy-invite-link")
    expect(owner.locator("#copy-invite-link")).to_have_text("Copied")
    link: str = owner.evaluate("navigator.clipboard.readText()")
    assert link == owner.locator("#invite-link").input_value()
    expect(owner.locator(f'#invites tr[data-email="{email}"]')).to_contain_text("member")
    return link


def _join_with_a_new_account(helper: Page, link: str, base_url: str) -> None:
    helper.goto(link)
    expect(helper.locator("h1")).to_have_text("Join Sunny Bakes")
    expect(helper.locator("#invite-card")).to_contain_text("creator@example.com")
    expect(helper.locator("#email")).to_have_value(HELPER)
    helper.fill("#password", PASSWORD)
    helper.fill("#password2", PASSWORD)
    helper.click("#create-and-join")
    expect(helper).to_have_url(f"{base_url}/")
    expect(helper.locator("details.user-menu summary")).to_contain_text("Sunny Bakes")


def _promote_to_admin(owner: Page, email: str) -> None:
    owner.reload()
    member_row = owner.locator(f'#members tr[data-email="{email}"]')
    expect(member_row).to_have_attribute("data-role", "member")
    member_row.locator("select[name=role]").select_option("admin")
    member_row.locator("button[data-action=change-role]").click()
    expect(owner.locator("#team-notice")).to_have_text("Role changed.")
    expect(member_row).to_have_attribute("data-role", "admin")


def test_an_invited_member_joins_read_only_and_can_edit_once_promoted(
    connected: Connected, browser: Browser, base_url: str, db_url: str
) -> None:
    owner = connected.page
    campaign_id = create_campaign(owner, name="Lemon loaf recipe")
    link = _invite_and_copy_the_link(owner, base_url, HELPER)
    assert re.fullmatch(rf"{re.escape(base_url)}/invite/[A-Za-z0-9_-]{{43}}", link)

    other = browser.new_context(base_url=base_url)
    try:
        helper = other.new_page()
        helper.route(CDN_PATTERN, lambda route: route.abort())
        _join_with_a_new_account(helper, link, base_url)

        # They see the owner's campaigns, with the change buttons disabled.
        helper.click("nav >> text=Campaigns")
        row = helper.locator(f'#campaign-list tr[data-campaign-id="{campaign_id}"]')
        expect(row).to_contain_text("Lemon loaf recipe")
        expect(helper.locator("#new-campaign")).to_have_count(0)
        row.locator("a.campaign-name").click()
        expect(helper).to_have_url(re.compile(rf"/campaigns/{campaign_id}$"))
        expect(helper.locator("#name")).to_be_disabled()
        expect(helper.locator("#dm_text")).to_be_disabled()
        expect(helper.locator("#save-campaign")).to_have_count(0)
        helper.click("nav >> text=Team")
        expect(helper.locator("#invite-email")).to_be_disabled()
        expect(helper.locator(".role-note").first).to_contain_text("owners and admins")

        _promote_to_admin(owner, HELPER)

        # After a reload the second person can edit.
        helper.goto(f"/campaigns/{campaign_id}")
        expect(helper.locator("#name")).to_be_enabled()
        helper.fill("#name", "Lemon loaf recipe, edited by the helper")
        helper.click("#save-campaign")
        expect(helper.locator("#editor-notice")).to_have_text("Saved.")
    finally:
        other.close()

    [(name,)] = _rows(db_url, "SELECT name FROM campaigns WHERE id = %s", campaign_id)
    assert name == "Lemon loaf recipe, edited by the helper"
    [(role,)] = _rows(
        db_url,
        "SELECT m.role FROM workspace_members m JOIN users u ON u.id = m.user_id "
        "WHERE u.email = %s",
        HELPER,
    )
    assert role == "admin"
