"""A creator watches the funnel and the charts move: a fan comments, gets the DM in the
sandbox's inbox and taps its link there (through our /go redirect); the overview's chart
counts the tap by itself (its 10 s refresh), the campaign's funnel and charts count it too,
the range switch swaps only the charts and puts the range in the address, and it all fits a
390 px phone.
"""

from __future__ import annotations

import re
from typing import Any

from playwright.sync_api import Browser, Page, Route, expect

from tests.e2e.flows import Connected, create_campaign
from tests.support.dashboard import LEMON_REEL, SUNNY
from tests.support.log_data import wait_past_activation
from tests.support.processes import Service, wait_until
from tests.support.sandbox_process import SandboxProcess

# What the worker does (a webhook to a sent DM) takes a second or two; a loaded two-core machine
# can stretch that tenfold, and only a stuck pipeline should fail.
WITHIN_S = 60
PHONE = {"width": 390, "height": 844}
FAN_PHONE = (
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 "
    "(KHTML, like Gecko) Mobile/15E148 Instagram 321.0.0.29.112"
)
RECIPE = "https://sunny.example/lemon"


def _step(page: Page, key: str) -> str:
    return page.locator(f'#funnel-steps tr[data-step="{key}"] .n-count').inner_text()


def _funnel(page: Page, campaign_id: int) -> dict[str, str]:
    page.goto(f"/campaigns/{campaign_id}")
    return {key: _step(page, key).split()[0] for key in ("seen", "matched", "sent", "clicked")}


def _tap_in_the_inbox(browser: Browser, sandbox: SandboxProcess) -> None:
    """The fan, on a phone, taps the DM's button; the creator's site answers offline."""
    fan = browser.new_context(user_agent=FAN_PHONE)
    landed: list[str] = []

    def creators_site(route: Route) -> None:
        landed.append(route.request.url)
        route.fulfill(status=200, content_type="text/html", body="<h1>Lemon loaf</h1>")

    fan.route(re.compile(r"^https://sunny\.example/.*"), creators_site)
    inbox = fan.new_page()
    inbox.goto(f"{sandbox.base_url}/fan/inbox?fan=jane.doe&account={SUNNY}")
    link = inbox.locator("#thread a", has_text="Get the recipe")
    expect(link).to_have_attribute("href", re.compile(r"/go/"))
    with fan.expect_page() as opened:
        link.click()
    expect(opened.value.locator("h1")).to_have_text("Lemon loaf")
    assert landed == [RECIPE]
    fan.close()


def _widths(page: Page) -> dict[str, Any]:
    return page.evaluate(
        """() => ({
            scroll: document.documentElement.scrollWidth,
            inner: window.innerWidth,
            charts: [...document.querySelectorAll('svg.chart')]
                .map(svg => Math.ceil(svg.getBoundingClientRect().right)),
        })"""
    )


def test_the_funnel_and_charts_follow_a_fans_tap(
    connected: Connected,
    sandbox: SandboxProcess,
    worker: Service,
    db_url: str,
    browser: Browser,
) -> None:
    page = connected.page
    campaign_id = create_campaign(page, button=("Get the recipe", RECIPE), activate=True)
    wait_past_activation(db_url)
    sandbox.admin.fan_comment("jane.doe", LEMON_REEL, "RECIPE please! 🍋")
    wait_until(
        lambda: bool(sandbox.admin.inbox("jane.doe")["messages"]),
        timeout=WITHIN_S,
        what="the DM in jane.doe's inbox",
    )
    wait_until(
        lambda: _funnel(page, campaign_id)["sent"] == "1",
        timeout=WITHIN_S,
        interval=0.5,
        what="the funnel to count the DM as sent",
    )
    assert _funnel(page, campaign_id) == {"seen": "1", "matched": "1", "sent": "1", "clicked": "0"}
    expect(page.locator('#funnel-steps tr[data-step="clicked"] .n-rate')).to_have_text("0.0%")

    # The overview, left open while the fan taps: its chart catches up on its own.
    page.goto("/")
    expect(page.locator("#chart-deliveries-figure .n-sent")).to_have_text("1")
    expect(page.locator("#chart-taps-figure .n-taps")).to_have_text("0")
    expect(page.locator("#chart-taps rect.bar-taps")).to_have_count(0)

    _tap_in_the_inbox(browser, sandbox)

    expect(page.locator("#chart-taps-figure .n-taps")).to_have_text("1", timeout=WITHIN_S * 1000)
    expect(page.locator("#chart-taps rect.bar-taps")).to_have_count(1)
    assert page.url.endswith("/")  # no reload: the refresh swapped the section in place

    wait_until(
        lambda: _funnel(page, campaign_id)["clicked"] == "1",
        timeout=WITHIN_S,
        interval=0.5,
        what="the funnel to count the tap",
    )
    expect(page.locator('#funnel-steps tr[data-step="clicked"] .n-rate')).to_have_text("100.0%")
    expect(page.locator("#chart-funnel .funnel-step").last).to_contain_text(
        "Tapped a link: 1 person (100.0%)"
    )
    expect(page.locator("#campaign-charts #chart-taps-figure .n-taps")).to_have_text("1")
    expect(page.locator('#funnel-buttons tr[data-button="0"] .n-people')).to_have_text("1")

    # The range switch: only the charts change, and the address says which range.
    page.locator("#name").fill("A name typed but not saved")
    page.locator('#campaign-charts a[data-range="24h"]').click()
    expect(page).to_have_url(re.compile(rf"/campaigns/{campaign_id}\?range=24h$"))
    expect(page.locator('#campaign-charts a[data-range="24h"]')).to_have_attribute(
        "aria-current", "true"
    )
    expect(page.locator("#campaign-charts #chart-taps rect.bar-taps")).to_have_count(1)
    expect(page.locator("#name")).to_have_value("A name typed but not saved")

    # A phone: every chart fits the screen, and the page needs no sideways scrolling.
    page.set_viewport_size(PHONE)
    for url in (f"/campaigns/{campaign_id}", "/"):
        page.goto(url)
        expect(page.locator("svg.chart").first).to_be_visible()
        widths = _widths(page)
        assert widths["scroll"] <= widths["inner"] == PHONE["width"], widths
        assert all(right <= PHONE["width"] for right in widths["charts"]), widths
