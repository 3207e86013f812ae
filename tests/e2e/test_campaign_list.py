"""The campaign list in Chromium: archiving asks first, as disconnecting an account does."""

from __future__ import annotations

import re
from typing import Any

import psycopg
from playwright.sync_api import expect

from tests.e2e.flows import Connected, create_campaign


def _rows(db_url: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(db_url) as conn:
        return list(conn.execute(sql, params).fetchall())


def test_archive_asks_for_confirmation_first(connected: Connected, db_url: str) -> None:
    page = connected.page
    campaign_id = create_campaign(page, name="Lemon loaf recipe")
    page.goto("/campaigns")
    row = page.locator(f'tr[data-campaign-id="{campaign_id}"]')
    confirm = row.locator("button[data-action=archive-confirm]")
    expect(confirm).to_be_hidden()

    row.locator("[data-action=archive]").click()  # opens the question, changes nothing
    expect(row.locator(".confirm-panel")).to_contain_text("Archive Lemon loaf recipe?")
    expect(confirm).to_be_visible()
    assert _rows(db_url, "SELECT status FROM campaigns") == [("draft",)]

    confirm.click()
    expect(page).to_have_url(re.compile(r"/campaigns$"))
    expect(page.locator(f'tr[data-campaign-id="{campaign_id}"]')).to_have_count(0)
    assert _rows(db_url, "SELECT status FROM campaigns") == [("archived",)]
