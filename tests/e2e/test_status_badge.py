"""The header badge tells a person whether a real worker is running, without a reload."""

from __future__ import annotations

import signal
from pathlib import Path

from playwright.sync_api import Page, expect

from tests.e2e.flows import SignedIn
from tests.support.processes import start_worker


def test_badge_turns_healthy_with_a_worker_and_down_when_it_stops(
    page: Page, base_url: str, test_env: dict[str, str], artifacts_dir: Path
) -> None:
    page.goto("/")
    badge = page.locator("#status-badge .badge")
    expect(badge).to_have_attribute("data-state", "down", timeout=15_000)

    worker = start_worker(test_env, artifacts_dir)
    try:
        # The badge polls every 5 s; a worker needs a few seconds to boot and beat.
        expect(badge).to_have_attribute("data-state", "healthy", timeout=45_000)
        expect(badge).to_contain_text("healthy")
        # The sign-in page shows strangers the state only, never how much work is waiting.
        expect(badge).not_to_contain_text("waiting")
        expect(badge).not_to_contain_text("queued")

        worker.signal(signal.SIGTERM)
        expect(badge).to_have_attribute("data-state", "down", timeout=20_000)
        expect(badge).to_contain_text("down")
    finally:
        worker.stop()


def test_a_banner_says_dms_wait_while_no_worker_runs(
    signed_in: SignedIn, web_env: dict[str, str], artifacts_dir: Path
) -> None:
    page = signed_in.page
    page.goto("/campaigns")
    banner = page.locator("#worker-banner [data-banner='no-worker']")
    expect(banner).to_be_visible(timeout=15_000)
    expect(banner).to_contain_text("New comments are being stored")
    expect(banner).to_contain_text("DMs wait")

    worker = start_worker(web_env, artifacts_dir)
    try:
        expect(banner).to_have_count(0, timeout=45_000)
        worker.kill()  # SIGKILL: the heartbeat expires on its own and the banner comes back
        expect(banner).to_be_visible(timeout=60_000)
    finally:
        worker.stop()
