"""The header badge tells a person whether a real worker is running, without a reload."""

from __future__ import annotations

import signal
from pathlib import Path

from playwright.sync_api import Page, expect

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
        expect(badge).to_contain_text("queued")

        worker.signal(signal.SIGTERM)
        expect(badge).to_have_attribute("data-state", "down", timeout=20_000)
        expect(badge).to_contain_text("down")
    finally:
        worker.stop()
