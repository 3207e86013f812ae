"""The campaign list in Chromium: archiving asks first, as disconnecting an account does; the
comments waiting for their DM are counted in words, linked to them in the log."""

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


def test_comments_waiting_for_their_dm_show_in_todays_column_on_a_phone(
    connected: Connected, db_url: str
) -> None:
    page = connected.page
    campaign_id = create_campaign(page, name="Lemon loaf recipe")
    [(workspace_id,)] = _rows(db_url, "SELECT workspace_id FROM campaigns")
    with psycopg.connect(db_url) as conn:
        conn.execute(
            "INSERT INTO dm_logs (workspace_id, account_id, campaign_id, trigger_kind,"
            " trigger_id, recipient_id, recipient_username, trigger_text, pr_state,"
            " pr_attempts, deadline_at)"
            " SELECT %s, %s, %s, 'comment', '1790' || lpad(n::text, 12, '0'), '99' || n,"
            " 'fan.' || n, 'RECIPE please', 'PENDING', 0, now() + interval '6 days'"
            " FROM generate_series(1, 1200) AS n",
            (workspace_id, connected.account_id, campaign_id),
        )
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto("/campaigns")
    row = page.locator(f'tr[data-campaign-id="{campaign_id}"]')
    waiting = row.locator("a.count-waiting")
    expect(waiting).to_have_text("1,200 waiting")
    expect(row.locator('td[data-label="Today"]')).to_contain_text("0 sent · 1,200 waiting")
    widths = page.evaluate(
        "() => ({scroll: document.documentElement.scrollWidth, inner: window.innerWidth})"
    )
    assert widths["scroll"] <= widths["inner"], widths

    waiting.click()
    expect(page).to_have_url(re.compile(rf"/log\?state=PENDING&campaign={campaign_id}$"))
    rows = page.locator("#log-rows tr.log-row")
    expect(rows.first).to_be_visible()
    expect(rows.first).to_have_attribute("data-state", "PENDING")
