"""The header badge tells a person whether a real worker is running, without a reload."""

from __future__ import annotations

import signal
from pathlib import Path

from playwright.sync_api import Page, expect

from tests.e2e.flows import SignedIn
from tests.support.processes import start_worker, worker_beating

# The badge asks every 5 s: a few of its rounds on a busy machine. A worker's boot is waited
# for apart, on its progress: it takes as long as the CPU it gets.
BADGE_MS = 30_000


def test_badge_turns_healthy_with_a_worker_and_down_when_it_stops(
    page: Page, web_port: int, test_env: dict[str, str], artifacts_dir: Path
) -> None:
    page.goto("/")
    badge = page.locator("#status-badge .badge")
    expect(badge).to_have_attribute("data-state", "down", timeout=BADGE_MS)

    worker = start_worker(test_env, artifacts_dir)
    try:
        worker.wait_until_ready(
            lambda: worker_beating(web_port), what="the worker's first heartbeat"
        )
        expect(badge).to_have_attribute("data-state", "healthy", timeout=BADGE_MS)
        expect(badge).to_contain_text("healthy")
        # The sign-in page shows strangers the state only, never how much work is waiting.
        expect(badge).not_to_contain_text("waiting")
        expect(badge).not_to_contain_text("queued")

        worker.signal(signal.SIGTERM)
        expect(badge).to_have_attribute("data-state", "down", timeout=2 * BADGE_MS)
        expect(badge).to_contain_text("down")
    finally:
        worker.stop()


def test_a_banner_says_dms_wait_while_no_worker_runs(
    signed_in: SignedIn, web_env: dict[str, str], web_port: int, artifacts_dir: Path
) -> None:
    page = signed_in.page
    page.goto("/campaigns")
    banner = page.locator("#worker-banner [data-banner='no-worker']")
    expect(banner).to_be_visible(timeout=BADGE_MS)
    expect(banner).to_contain_text("New comments are being stored")
    expect(banner).to_contain_text("DMs wait")

    worker = start_worker(web_env, artifacts_dir)
    try:
        worker.wait_until_ready(
            lambda: worker_beating(web_port), what="the worker's first heartbeat"
        )
        expect(banner).to_have_count(0, timeout=BADGE_MS)
        worker.kill()  # SIGKILL: the heartbeat expires on its own and the banner comes back
        expect(banner).to_be_visible(timeout=60_000)
    finally:
        worker.stop()
