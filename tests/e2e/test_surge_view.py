"""The surge as a creator sees it in Chromium: comments waiting for Instagram's hourly limit on
the overview and the account page, read right with 40,000, 1 and none waiting, on a phone's
width, followed without a reload; and, with a real worker and the sandbox refusing for its
hourly limit, the account put on hold by Meta said in words, with no "sent" it cannot prove.
"""

from __future__ import annotations

import re
from pathlib import Path

import psycopg
from playwright.sync_api import Browser, Page, expect

from tests.e2e.flows import Connected, create_campaign
from tests.support.dashboard import LEMON_REEL
from tests.support.log_data import wait_past_activation
from tests.support.processes import Service, wait_until
from tests.support.sandbox_process import SandboxProcess

PHONE = {"width": 390, "height": 844}
# The panels re-ask every 10 s; a busy machine gets far more than that, and the worker's
# sends behind them (a refusal that puts the account on hold) take longer too.
WITHIN_MS = 60_000
# A time the panel names, in the workspace's zone: the date in front when not today.
AT = r"([A-Z][a-z]{2} \d\d )?\d\d:\d\d"


def _seed_waiting(
    db_url: str, account_id: int, campaign_id: int, rows: list[tuple[int, str]]
) -> None:
    """Comments waiting for their private reply: (how many, deadline from now) each."""
    with psycopg.connect(db_url) as conn:
        [(workspace_id,)] = conn.execute(
            "SELECT workspace_id FROM campaigns WHERE id = %s", (campaign_id,)
        ).fetchall()
        start = 0
        for count, deadline in rows:
            conn.execute(
                "INSERT INTO dm_logs (workspace_id, account_id, campaign_id, trigger_kind,"
                " trigger_id, recipient_id, recipient_username, trigger_text, pr_state,"
                " pr_attempts, deadline_at)"
                " SELECT %s, %s, %s, 'comment', '1790' || lpad(n::text, 12, '0'),"
                " '99' || n, 'fan.' || n, 'RECIPE please', 'PENDING', 0,"
                " now() + CAST(%s AS interval)"
                " FROM generate_series(CAST(%s AS int), CAST(%s AS int)) AS n",
                (workspace_id, account_id, campaign_id, deadline, start, start + count - 1),
            )
            start += count


def _settle(db_url: str, *, keep: int) -> None:
    """Mark all but `keep` waiting comments answered, as the pacer's sends would."""
    with psycopg.connect(db_url) as conn:
        conn.execute(
            "UPDATE dm_logs SET pr_state = 'SENT', pr_sent_at = now(), updated_at = now()"
            " WHERE pr_state = 'PENDING' AND id NOT IN (SELECT id FROM dm_logs"
            " WHERE pr_state = 'PENDING' ORDER BY id LIMIT %s)",
            (keep,),
        )


def _shot(page: Page, artifacts_dir: Path, name: str) -> None:
    page.screenshot(path=str(artifacts_dir / f"surge-{name}.png"), full_page=True)


def _fits(page: Page) -> None:
    widths = page.evaluate(
        "() => ({scroll: document.documentElement.scrollWidth, inner: window.innerWidth})"
    )
    assert widths["scroll"] <= widths["inner"], widths


def test_a_backlog_reads_right_from_forty_thousand_to_none_on_a_phone(
    connected: Connected, db_url: str, artifacts_dir: Path
) -> None:
    page = connected.page
    campaign_id = create_campaign(page)
    # 40,000 comments: 1,000 whose 7-day window closes within the hour, the rest with days
    # to spare.
    _seed_waiting(
        db_url, connected.account_id, campaign_id, [(1_000, "1 hour"), (39_000, "6 days")]
    )
    page.set_viewport_size(PHONE)
    page.goto("/")
    surge = page.locator(f"#surge-{connected.account_id}")
    expect(surge.locator("h3")).to_have_text("@sunny.bakes: 40,000 comments waiting for their DM")
    _shot(page, artifacts_dir, "overview-40000")
    _fits(page)

    expect(surge.locator('[data-field="sent"]')).to_contain_text("0 of 750 used")
    expect(surge.locator('[data-field="pace"]')).to_have_text("750 per hour, oldest comments first")
    expect(surge.locator('[data-field="drain"]')).to_have_text(
        re.compile(rf"^by {AT}, about 2 days from now$")
    )
    # About 750 of the 1,000 make it in their hour (one fewer each 4.8 s the page takes to
    # come); the rest are said to miss.
    expect(surge.locator('[data-field="will-miss"]')).to_have_text(
        re.compile(r"^2[4-9]\d at this pace \(estimate\)$")
    )
    expect(page.locator('#per-account tr[data-account="sunny.bakes"] .n-waiting')).to_have_text(
        "40,000"
    )
    # The header's queue is the worker's jobs: rows waiting for the hourly limit hold none.
    expect(page.locator("#status-badge .badge")).not_to_contain_text("waiting")
    _fits(page)

    page.goto(f"/accounts/{connected.account_id}")
    expect(surge.locator("h3")).to_contain_text("40,000 comments waiting")
    _shot(page, artifacts_dir, "account-40000")
    _fits(page)
    surge.get_by_role("link", name="See the waiting comments in the delivery log").click()
    expect(page).to_have_url(re.compile(rf"/log\?state=PENDING&account={connected.account_id}$"))
    expect(page.locator("#log-rows tr.log-row").first).to_be_visible()

    # Left open, the account page follows the backlog as it drains, without a reload.
    page.goto(f"/accounts/{connected.account_id}")
    page.evaluate("window.__sameDocument = 'yes'")
    _settle(db_url, keep=1)
    expect(surge.locator("h3")).to_have_text(
        "@sunny.bakes: 1 comment waiting for their DM", timeout=WITHIN_MS
    )
    expect(surge.locator('[data-field="drain"]')).to_have_text(
        re.compile(rf"^by {AT}, under a minute from now$")
    )
    expect(surge.locator('[data-field="will-miss"]')).to_have_text("none at this pace")
    _shot(page, artifacts_dir, "account-1")
    _fits(page)
    _settle(db_url, keep=0)
    expect(page.locator("#no-backlog")).to_be_visible(timeout=WITHIN_MS)
    expect(page.locator(".surge")).to_have_count(0)
    assert page.evaluate("window.__sameDocument") == "yes"
    _shot(page, artifacts_dir, "account-0")


def test_the_surge_reads_without_javascript(
    connected: Connected, db_url: str, browser: Browser, base_url: str
) -> None:
    campaign_id = create_campaign(connected.page)
    _seed_waiting(db_url, connected.account_id, campaign_id, [(3, "6 days")])
    context = browser.new_context(
        java_script_enabled=False,
        base_url=base_url,
        storage_state=connected.page.context.storage_state(),
    )
    try:
        page = context.new_page()
        for path in ("/", f"/accounts/{connected.account_id}"):
            page.goto(path)
            surge = page.locator(f"#surge-{connected.account_id}")
            expect(surge.locator("h3")).to_have_text(
                "@sunny.bakes: 3 comments waiting for their DM"
            )
            expect(surge.locator('[data-field="drain"]')).to_have_text(
                re.compile(rf"^by {AT}, under a minute from now$")
            )
    finally:
        context.close()


def test_an_account_on_hold_by_meta_reads_as_such_and_claims_no_send(
    connected: Connected,
    sandbox: SandboxProcess,
    worker: Service,
    db_url: str,
    artifacts_dir: Path,
) -> None:
    page = connected.page
    create_campaign(page, activate=True)
    wait_past_activation(db_url)
    # Instagram's own hourly limit is one private reply: the second send is refused with
    # #613 and the time access returns, which puts the account on hold.
    sandbox.admin.update_settings(private_replies_per_hour=1)
    fans = ["fan.one", "fan.two", "fan.three"]
    for fan in fans:
        sandbox.admin.add_fan(fan)
    first = sandbox.admin.fan_comment(fans[0], LEMON_REEL, "RECIPE please")
    wait_until(
        lambda: sandbox.admin.comment_stats(first["id"])["private_replies_delivered"] == 1,
        timeout=60,
        interval=0.5,
        what="the first fan's DM",
    )
    for fan in fans[1:]:
        sandbox.admin.fan_comment(fan, LEMON_REEL, "RECIPE please")

    page.set_viewport_size(PHONE)
    page.goto("/")
    surge = page.locator(f"#surge-{connected.account_id}")
    pace = surge.locator('[data-field="pace"]')
    expect(pace).to_contain_text("On hold", timeout=WITHIN_MS)
    expect(pace).to_have_text(
        re.compile(
            rf"^On hold: Instagram asked this account to wait\. Sending resumes at {AT}"
            r" \(in (about [^)]+|under a minute)\)\.$"
        )
    )
    # The third comment may reach the ledger after the hold: the next refresh counts it.
    expect(surge.locator("h3")).to_have_text(
        "@sunny.bakes: 2 comments waiting for their DM", timeout=WITHIN_MS
    )
    expect(surge.locator('[data-field="drain"]')).to_have_text(
        re.compile(rf"^by {AT}, under a minute after sending resumes$")
    )
    # What went out before the hold is not set beside it as a share of the limit in use.
    expect(surge.locator('[data-field="sent"]')).to_contain_text("none go out until it ends")
    expect(surge.locator('[data-field="sent"]')).not_to_contain_text("of 750")
    # Meta's words and codes stay in the details; nothing here claims a send.
    expect(surge).not_to_contain_text("613")
    expect(surge).not_to_contain_text("rate limit")
    expect(surge).not_to_contain_text("SENT")
    _shot(page, artifacts_dir, "overview-on-hold")
    _fits(page)
    page.goto(f"/accounts/{connected.account_id}")
    expect(pace).to_contain_text("On hold")
    _shot(page, artifacts_dir, "account-on-hold")
    _fits(page)
    # The waiting comments in the log: waiting, in words; Meta's refusal is in a row's details.
    surge.get_by_role("link", name="See the waiting comments in the delivery log").click()
    rows = page.locator("#log-rows tr.log-row")
    expect(rows).to_have_count(2)
    for n in range(2):
        expect(rows.nth(n).locator(".leg-pr .state")).to_have_attribute("data-state", "PENDING")
    expect(page.locator("#log-rows")).not_to_contain_text("613")
    _shot(page, artifacts_dir, "log-on-hold")
    _fits(page)
    # Each state reads on one line, not broken a few letters at a time.
    heights = page.evaluate(
        """() => [...document.querySelectorAll('#log-rows .state')].map(s =>
            s.getBoundingClientRect().height / parseFloat(getComputedStyle(s).fontSize))"""
    )
    assert heights, heights
    assert max(heights) < 2.5, heights
