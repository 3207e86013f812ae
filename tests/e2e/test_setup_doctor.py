"""An owner opens the setup doctor, sees that the `messages` field is not subscribed (Meta
would send no DM events), re-subscribes, and the check turns green; meanwhile the overview
links to the doctor. The handshake check passes, since this web process is PUBLIC_BASE_URL."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.e2e.flows import Connected, connect_instagram
from tests.support.sandbox_process import SandboxProcess


def test_missing_messages_subscription_is_fixed_from_the_doctor(
    connected: Connected, sandbox: SandboxProcess
) -> None:
    page = connected.page
    sandbox.admin.set_subscription(
        "sunny.bakes", ["comments", "messaging_postbacks", "messaging_seen"]
    )

    page.get_by_role("link", name="Setup", exact=True).click()
    expect(page).to_have_url(f"{page.url.split('/setup')[0]}/setup")
    expect(page.locator('#doctor-server [data-check="handshake"]')).to_have_attribute(
        "data-status", "ok"
    )
    card = page.locator(f"#account-{connected.account_id}")
    subscription = card.locator('[data-check="subscription"]')
    expect(subscription).to_have_attribute("data-status", "fail")
    expect(subscription).to_contain_text("messages (DMs from fans")
    expect(page.locator("#doctor-verdict")).to_contain_text("Webhook fields subscribed")

    # The overview points at the doctor while the check fails.
    page.goto("/")
    expect(page.locator("#doctor-link")).to_contain_text("@sunny.bakes: Webhook fields subscribed")
    page.locator("#doctor-link").get_by_role("link", name="Open the setup doctor").click()

    page.locator(f"#resubscribe-{connected.account_id}").click()
    expect(subscription).to_have_attribute("data-status", "ok")
    expect(subscription).to_contain_text("messages")
    expect(page.locator(f"#resubscribe-{connected.account_id}")).to_have_count(0)
    expect(page.locator("#doctor-verdict")).to_have_text("No check failed.")
    fields = sandbox.admin.world()["accounts"]
    sunny = next(a for a in fields if a["username"] == "sunny.bakes")
    assert "messages" in sunny["subscribed_fields"]

    page.goto("/")
    expect(page.locator("#overview")).to_be_visible()
    expect(page.locator("#doctor-link")).to_have_count(0)


def test_reconnecting_an_account_clears_the_overviews_pointer_to_the_doctor(
    connected: Connected, sandbox: SandboxProcess
) -> None:
    page = connected.page
    sandbox.admin.revoke_tokens(account="sunny.bakes")
    page.goto("/setup")
    card = page.locator(f"#account-{connected.account_id}")
    expect(card.locator('[data-check="token"]')).to_have_attribute("data-status", "fail")
    page.goto("/")
    expect(page.locator("#doctor-link")).to_contain_text("@sunny.bakes")

    connect_instagram(page, "sunny.bakes")  # what the card and the doctor ask for
    page.goto("/")
    expect(page.locator("#overview")).to_be_visible()
    expect(page.locator("#doctor-link")).to_have_count(0)
