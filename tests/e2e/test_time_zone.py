"""Sign-up in Chromium takes the browser's time zone as the workspace's (a hidden field that
app.js fills; no inline script), and without JavaScript the workspace is in UTC."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from playwright.sync_api import Browser, expect

from tests.e2e.flows import SignedIn, sign_up


@pytest.fixture
def browser_context_args(browser_context_args: dict[str, Any]) -> dict[str, Any]:
    return {**browser_context_args, "timezone_id": "Asia/Tokyo"}


def _zone(db_url: str, email: str) -> str:
    with psycopg.connect(db_url) as conn:
        row = conn.execute(
            "SELECT w.time_zone FROM workspaces w"
            " JOIN workspace_members m ON m.workspace_id = w.id"
            " JOIN users u ON u.id = m.user_id WHERE u.email = %s",
            (email,),
        ).fetchone()
    assert row is not None, email
    return str(row[0])


def test_sign_up_takes_the_browser_zone_and_the_team_page_shows_it(
    signed_in: SignedIn, db_url: str
) -> None:
    assert _zone(db_url, signed_in.email) == "Asia/Tokyo"
    page = signed_in.page
    page.goto("/team")
    expect(page.locator("#time_zone")).to_have_value("Asia/Tokyo")
    page.fill("#time_zone", "Europe/Paris")
    page.click("#time-zone-save")
    expect(page.locator("#team-notice")).to_contain_text("Time zone saved")
    assert _zone(db_url, signed_in.email) == "Europe/Paris"


def test_without_javascript_the_workspace_is_in_utc(
    browser: Browser, base_url: str, db_url: str, test_env: dict[str, str]
) -> None:
    context = browser.new_context(
        base_url=base_url, java_script_enabled=False, timezone_id="Asia/Tokyo"
    )
    try:
        sign_up(context.new_page(), "nojs@example.com")
    finally:
        context.close()
    assert _zone(db_url, "nojs@example.com") == "UTC"
