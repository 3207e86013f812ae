"""The whole two-step path through real processes: the sandbox POSTs signed webhooks (each one
three times) to a real web process, two real worker processes ingest and deliver. A gated
campaign with an opening DM and a follow-up: the fan taps the opening DM without following and
is asked to follow; follows and taps "I'm following" twice while Instagram's follow status
lags. Exactly one opening DM, one prompt, one reveal and one follow-up arrive."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from app.db.models import DmLog, LegState
from app.delivery.content.follow_gate import CHECKING_PAYLOAD, CHECKING_TEXT
from tests.integration.delivery.conftest import LEMON_REEL, World
from tests.integration.delivery.conversations import (
    ACCOUNT,
    buttons_of,
    kinds,
    logs,
    reveals,
    text_of,
    two_step_campaign,
)
from tests.support.processes import free_port, start_web, start_worker

# The sandbox signs with its own default secret; this web process checks that one.
SANDBOX_SECRET = "sandbox-instagram-app-secret"
FOLLOW_UP_TEXT = "Enjoy the loaf!"


def _gate_rows(rows: list[DmLog]) -> list[DmLog]:
    """Every row but the follow gate's "Checking…" note."""
    return [row for row in rows if row.trigger_payload != CHECKING_PAYLOAD]


async def _eventually(check: Callable[[], Awaitable[bool]], *, within_s: float, what: str) -> None:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if await check():
            return
        await asyncio.sleep(0.2)
    raise TimeoutError(f"gave up after {within_s:g} s waiting for {what}")


async def test_opening_dm_gate_and_follow_up_through_web_and_two_workers(
    world: World, delivery_env: dict[str, str], artifacts_dir: Path
) -> None:
    admin = world.admin
    campaign = await two_step_campaign(
        world,
        opening_dm_enabled=True,
        opening_dm_text="Tap for the recipe",
        opening_dm_button_title="Send it",
        follow_gate_enabled=True,
        follow_prompt_text="Follow first, then tap",
        follow_prompt_button_title="I'm following",
        follow_up_enabled=True,
        follow_up_text=FOLLOW_UP_TEXT,
        follow_up_delay_minutes=0,
    )
    port = free_port()
    env = {**delivery_env, "INSTAGRAM_APP_SECRET": SANDBOX_SECRET, "FOLLOW_RECHECK_DELAYS_S": "1,2"}
    log_dir = artifacts_dir / "two-step"
    web = start_web(env, port, log_dir)
    workers = [start_worker(env, log_dir, f"two-step-worker-{n}") for n in range(2)]
    try:
        admin.update_settings(require_subscription=False, follow_lag_seconds=1.5)
        registered = admin.register_webhook(
            f"http://127.0.0.1:{port}/webhooks/instagram", env["WEBHOOK_VERIFY_TOKEN"]
        )
        assert registered["verified"], registered
        admin.add_fault("webhook", "duplicate", count=3)

        admin.fan_comment("zoe.lefevre", LEMON_REEL, "RECIPE please")

        async def opening_arrived() -> bool:
            return len(world.inbox("zoe.lefevre")) == 1

        await _eventually(opening_arrived, within_s=60, what="the opening DM")
        [opening] = world.inbox("zoe.lefevre")
        assert [b["payload"] for b in buttons_of(opening)] == [f"followcheck:{campaign}:open"]

        admin.fan_tap("zoe.lefevre", ACCOUNT, mid=opening["mid"])

        async def prompted() -> bool:
            return len(world.inbox("zoe.lefevre")) == 2

        await _eventually(prompted, within_s=60, what="the follow prompt")
        prompt = world.inbox("zoe.lefevre")[-1]
        assert [b["payload"] for b in buttons_of(prompt)] == [f"followcheck:{campaign}"]

        admin.fan_follow("zoe.lefevre", ACCOUNT)
        admin.fan_tap("zoe.lefevre", ACCOUNT, mid=prompt["mid"])
        admin.fan_tap("zoe.lefevre", ACCOUNT, mid=prompt["mid"])

        async def settled() -> bool:
            rows = await logs(world)
            return len(_gate_rows(rows)) == 5 and all(row.pr_state.is_final for row in rows)

        await _eventually(settled, within_s=90, what="the taps, the reveal and the follow-up")
    finally:
        for worker in workers:
            worker.stop()
        web.stop()
        admin.unregister_webhook()

    every_row = await logs(world)
    rows = _gate_rows(every_row)
    # A tap that Instagram answers "not following yet" (the follow shows after 1.5 s) also
    # gets the "Checking…" note at once, once per tap; whether each of the two taps is that
    # early depends on the machine's speed, so there are up to two notes.
    notes = [row for row in every_row if row.trigger_payload == CHECKING_PAYLOAD]
    assert len(notes) <= 2, kinds(notes)
    assert all(row.pr_state is LegState.SENT for row in notes), kinds(notes)
    assert sorted(kinds(rows)) == [
        ("comment", "opening_dm", "SENT"),
        ("follow_up", "follow_up", "SENT"),
        ("postback", "follow_prompt", "SENT"),
        ("postback", "reveal", "SENT"),
        ("postback", "reveal", "SKIPPED_DEDUP"),
    ], kinds(rows)
    assert all(row.pr_state is not LegState.UNCONFIRMED for row in rows)
    [revealed] = [r for r in rows if r.pr_state is LegState.SENT and r.message_kind == "reveal"]
    assert revealed.pr_evidence is not None
    assert revealed.pr_evidence["follow_gate"]["follows"] is True
    inbox = world.inbox("zoe.lefevre")
    assert [text_of(m) for m in inbox].count(CHECKING_TEXT) == len(notes)
    assert len(inbox) == 4 + len(notes), [text_of(m) for m in inbox]
    assert len(reveals(world, "zoe.lefevre")) == 1
    assert [text_of(m) for m in inbox][-1] == FOLLOW_UP_TEXT
    deliveries = admin.webhook_attempts()
    assert len(deliveries) >= 9, "every webhook was delivered three times"
