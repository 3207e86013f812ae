"""A fan taps the link in the sandbox's inbox: the tap goes through our redirect to the
creator's URL, and the creator's campaign page counts the person and the tap.
"""

from __future__ import annotations

import re

from playwright.sync_api import Browser, Page, Route, expect

from tests.e2e.flows import Connected, create_campaign
from tests.support.dashboard import LEMON_REEL, SUNNY
from tests.support.log_data import wait_past_activation
from tests.support.processes import Service, wait_until
from tests.support.sandbox_process import SandboxProcess

# What the worker does (a webhook to a sent DM) takes a second or two; a loaded two-core machine
# can stretch that tenfold, and only a stuck pipeline should fail.
WITHIN_S = 60
PHONE = (
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 "
    "(KHTML, like Gecko) Mobile/15E148 Instagram 321.0.0.29.112"
)
RECIPE = "https://sunny.example/lemon"


def _people(page: Page, campaign_id: int) -> str:
    page.goto(f"/campaigns/{campaign_id}")
    return page.locator("#clicks-people .stat-number").inner_text()


def test_a_fans_tap_in_the_inbox_is_counted_on_the_campaign(
    connected: Connected,
    sandbox: SandboxProcess,
    worker: Service,
    db_url: str,
    browser: Browser,
) -> None:
    page = connected.page
    campaign_id = create_campaign(page, button=("Get the recipe", RECIPE), activate=True)
    wait_past_activation(db_url)
    assert _people(page, campaign_id) == "0"

    sandbox.admin.fan_comment("jane.doe", LEMON_REEL, "RECIPE please! 🍋")
    wait_until(
        lambda: bool(sandbox.admin.inbox("jane.doe")["messages"]),
        timeout=WITHIN_S,
        what="the DM in jane.doe's inbox",
    )

    # The fan, on a phone, in a browser of their own; the creator's site answers offline.
    fan = browser.new_context(user_agent=PHONE)
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

    wait_until(
        lambda: _people(page, campaign_id) == "1",
        timeout=WITHIN_S,
        interval=0.5,
        what="the campaign page to count the tap",
    )
    expect(page.locator("#clicks-taps .stat-number")).to_have_text("1")
    expect(page.locator("#clicks-rate .stat-number")).to_have_text("100.0%")
    expect(page.locator('#clicks-per-button tr[data-button="0"] .n-taps')).to_have_text("1")
