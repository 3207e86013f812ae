"""The web intake's enqueue: a lone event's job goes at once, a busy stream shares jobs."""

from __future__ import annotations

import asyncio
import time

from app.delivery.intake.webhook_writer import WebhookIntake
from app.resources import Resources
from tests.support.webhooks import comment_value, comments_body, queued_keys

LINGER_S = 1.5


async def _queued_within(resources: Resources, count: int, within_s: float) -> float:
    """Seconds until `count` jobs are queued; fails after `within_s`."""
    started = time.monotonic()
    while len(await queued_keys(resources)) < count:
        waited = time.monotonic() - started
        assert waited < within_s, f"{count} jobs not queued within {within_s} s"
        await asyncio.sleep(0.01)
    return time.monotonic() - started


async def test_a_lone_event_goes_at_once_and_busy_ones_linger_together(
    resources: Resources,
) -> None:
    intake = WebhookIntake(resources.engine, resources.queue, linger_s=LINGER_S)
    intake.start()
    try:
        # Quiet: nothing to wait for, so the job is not held back by the linger.
        await intake.store(comments_body(comment_value("c-alone")), "instagram")
        assert await _queued_within(resources, 1, within_s=LINGER_S / 2) < LINGER_S / 2

        # A burst, committed together: one job for all of it.
        bodies = [comments_body(comment_value(f"c-burst-{n}")) for n in range(30)]
        await asyncio.gather(*(intake.store(body, "instagram") for body in bodies))
        await _queued_within(resources, 2, within_s=LINGER_S)

        # Busy now: the next event waits a moment for company before its job goes.
        await intake.store(comments_body(comment_value("c-after-burst")), "instagram")
        assert await _queued_within(resources, 3, within_s=LINGER_S * 3) >= LINGER_S * 0.8
    finally:
        await intake.close()
    keys = await queued_keys(resources)
    assert len(keys) == 3, keys
