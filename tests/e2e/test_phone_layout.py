"""Readable on a phone: at 390×844 (a current iPhone) the delivery log and the campaign list
fit the screen's width, with rows full of long words, so nothing needs sideways scrolling:
neither the page nor a table inside its scrolling wrapper.
"""

from __future__ import annotations

from typing import Any

import psycopg
from playwright.sync_api import Page, expect

from tests.e2e.flows import Connected, create_campaign

PHONE = {"width": 390, "height": 844}
# One unbroken word longer than a phone is wide, as fans do write them.
LONG_WORD = "RECIPEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEE"


def _widths(page: Page) -> dict[str, Any]:
    """The page's scroll width against the window's, and the scroll containers (a table's
    wrapper) whose content is wider than they are: those scroll sideways on their own, which
    the page's width alone would not show."""
    return page.evaluate(
        """() => ({
            scroll: document.documentElement.scrollWidth,
            inner: window.innerWidth,
            sideways: [...document.querySelectorAll('main *')]
                .filter(el => ['auto', 'scroll'].includes(getComputedStyle(el).overflowX))
                .filter(el => el.scrollWidth > el.clientWidth)
                .map(el => `${el.tagName.toLowerCase()}.${el.className}`),
        })"""
    )


def _fits(page: Page) -> None:
    widths = _widths(page)
    assert widths["inner"] == PHONE["width"]
    assert widths["scroll"] <= widths["inner"], widths
    assert widths["sideways"] == [], widths


def _seed_log(db_url: str, workspace_id: int, account_id: int, campaign_id: int) -> None:
    with psycopg.connect(db_url) as conn:
        for n, (state, error) in enumerate(
            [("SENT", None), ("FAILED", 551), ("UNCONFIRMED", 1), ("SKIPPED_DEDUP", None)]
        ):
            conn.execute(
                "INSERT INTO dm_logs (workspace_id, account_id, campaign_id, trigger_kind,"
                " trigger_id, recipient_username, trigger_text, pr_state, pr_attempts,"
                " pr_error_code) VALUES (%s, %s, %s, 'comment', %s, %s, %s, %s, 1, %s)",
                (
                    workspace_id,
                    account_id,
                    campaign_id,
                    f"1780000000000000{n}",
                    "a.fan.with.a.rather.long.username_2024",
                    f"{LONG_WORD} please!! 🍋🍋🍋 I have been waiting for this one all week",
                    state,
                    error,
                ),
            )


def test_the_log_and_the_campaign_list_fit_a_phone(connected: Connected, db_url: str) -> None:
    page = connected.page
    campaign_id = create_campaign(
        page,
        name="Lemon drizzle loaf, the recipe everyone keeps asking for",
        keyword=LONG_WORD[:50],
    )
    with psycopg.connect(db_url) as conn:
        [(workspace_id,)] = conn.execute("SELECT workspace_id FROM campaigns").fetchall()
    _seed_log(db_url, workspace_id, connected.account_id, campaign_id)

    page.set_viewport_size(PHONE)
    page.goto("/log")
    expect(page.locator("#log-rows tr.log-row")).to_have_count(4)
    expect(page.locator("button[data-action=retry]")).to_be_visible()
    _fits(page)

    page.goto("/campaigns")
    expect(page.locator(f'tr[data-campaign-id="{campaign_id}"]')).to_be_visible()
    _fits(page)
