"""What a creator does in the browser, as reusable steps for browser tests.

Each step drives the real pages and waits on what a person would see, never on timers:

    signed = sign_up(page, "creator@example.com")
    account = connect_instagram(page, "sunny.bakes")       # through the sandbox consent page
    campaign_id = create_campaign(page, name="Recipe", keyword="RECIPE", dm_text="Hi {username}")
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from playwright.sync_api import Locator, Page, expect

from tests.support.dashboard import PASSWORD

LEMON_CAPTION = "Lemon drizzle loaf"


@dataclass(frozen=True)
class SignedIn:
    page: Page
    email: str
    password: str


@dataclass(frozen=True)
class Connected:
    page: Page
    account_id: int
    username: str


def arrived(page: Page, url: str | re.Pattern[str]) -> None:
    """After a click that opens another page: its address, then its load event. htmx wires the
    new page's hx-* elements once the document is parsed; a click on one before that is the
    browser's own (a plain form post, or nothing for a button), not htmx's."""
    expect(page).to_have_url(url)
    page.wait_for_load_state()


def wired(swapped_in: Locator) -> None:
    """Until htmx has processed an element it swapped in: it marks new content htmx-added (and
    htmx-settling) and wires its hx-* attributes when it takes the marks off, once the swap has
    settled. Before that a click on it is the browser's own, not htmx's."""
    expect(swapped_in).not_to_have_class(re.compile(r"\bhtmx-(added|settling)\b"))


def sign_up(
    page: Page, email: str, *, password: str = PASSWORD, workspace: str | None = None
) -> SignedIn:
    page.goto("/signup")
    page.fill("#email", email)
    page.fill("#password", password)
    if workspace:
        page.fill("#workspace", workspace)
    page.click("button[type=submit]")
    expect(page).to_have_url(re.compile(r"/accounts\?welcome=1$"))
    return SignedIn(page=page, email=email, password=password)


def sign_in(page: Page, email: str, password: str = PASSWORD) -> None:
    page.goto("/login")
    page.fill("#email", email)
    page.fill("#password", password)
    page.click("button[type=submit]")
    expect(page.locator("details.user-menu")).to_be_visible()


def sign_out(page: Page) -> None:
    page.click("details.user-menu summary")
    page.click("#logout")
    expect(page).to_have_url(re.compile(r"/login\?signed_out=1$"))


def start_connect(page: Page) -> None:
    """Press "Connect Instagram" on the Accounts page; ends on the sandbox consent page."""
    page.goto("/accounts")
    page.click("#connect-instagram")
    expect(page.locator("#authorize-form")).to_be_visible()


def connect_instagram(
    page: Page, username: str = "sunny.bakes", *, allow: bool = True
) -> Connected:
    """Connect an account through the sandbox's consent page: pick it, then Allow (or Cancel)."""
    start_connect(page)
    page.get_by_label(re.compile(rf"@{re.escape(username)}\b")).check()
    page.click("button[value=allow]" if allow else "button[value=deny]")
    if not allow:
        expect(page.locator("#connect-problem")).to_be_visible()
        return Connected(page=page, account_id=0, username=username)
    expect(page.locator("#connect-success")).to_be_visible()
    card = page.locator(f'article.account-card[data-username="{username}"]')
    expect(card).to_be_visible()
    account_id = int((card.get_attribute("id") or "account-0").removeprefix("account-"))
    return Connected(page=page, account_id=account_id, username=username)


def add_keyword(page: Page, keyword: str, field: str = "keywords") -> None:
    entry = page.locator(f"#{field}_entry")
    entry.fill(keyword)
    entry.press("Enter")
    expect(page.locator(f'#{field}-chips .chip[data-chip="{keyword}"]')).to_be_visible()


def create_campaign(
    page: Page,
    *,
    name: str = "Lemon loaf recipe",
    keyword: str = "RECIPE",
    dm_text: str = "Hi {username}! Here is the recipe: {link}",
    button: tuple[str, str] | None = ("Get the recipe", "https://sunny.example/lemon"),
    caption: str = LEMON_CAPTION,
    activate: bool = False,
) -> int:
    """Create a campaign on the post whose caption starts with `caption`; returns its id."""
    page.goto("/campaigns/new")
    page.fill("#name", name)
    page.locator(".media-item", has_text=caption).first.click()
    add_keyword(page, keyword)
    page.fill("#dm_text", dm_text)
    if button:
        page.fill("#button_title_1", button[0])
        page.fill("#button_url_1", button[1])
    page.click("#save-activate" if activate else "#save-campaign")
    arrived(page, re.compile(r"/campaigns/\d+\?notice=created$"))
    match = re.search(r"/campaigns/(\d+)", page.url)
    assert match
    return int(match.group(1))
