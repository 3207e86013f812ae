"""The whole promise in Chromium, against real web, worker and sandbox processes: a fan
comments the keyword, the open delivery log shows the row turn SENT without a reload, and the
fan's inbox in the sandbox holds exactly one DM. Then the log's filters, history and timeline.
"""

from __future__ import annotations

import asyncio
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psycopg
from playwright.sync_api import expect
from saq import Queue

from app.queue import Lane, lane_queue_name
from app.queue.saq_adapter import pending_job_keys
from tests.e2e.flows import Connected, create_campaign
from tests.support.dashboard import LEMON_REEL
from tests.support.log_data import wait_past_activation
from tests.support.processes import Service, wait_until
from tests.support.sandbox_process import SandboxProcess

# What the worker does (a webhook to a sent DM) takes a second or two; a loaded two-core machine
# can stretch that tenfold, and only a stuck pipeline should fail.
DELIVERED_WITHIN_MS = 60_000
QUEUE = "delivery"  # the default QUEUE_NAME, which the test processes keep


def _rows(db_url: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(db_url) as conn:
        return list(conn.execute(sql, params).fetchall())


def _jobs_left(redis_url: str) -> list[str]:
    async def read() -> list[str]:
        keys: list[str] = []
        for lane in Lane:
            queue = Queue.from_url(redis_url, name=lane_queue_name(QUEUE, lane))
            try:
                keys += await pending_job_keys(queue)
            finally:
                await queue.disconnect()
        return keys

    # A thread of its own: the browser's event loop runs on this one.
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, read()).result()


def _work_left(redis_url: str, db_url: str) -> list[str]:
    """Jobs still queued, running or scheduled, other than the worker's crons, and webhook
    POSTs not yet ingested: anything that could still send a DM."""
    jobs = _jobs_left(redis_url)
    outbox = _rows(db_url, "SELECT id FROM webhook_events WHERE status IN ('received', 'enqueued')")
    return jobs + [f"webhook_event:{event_id}" for (event_id,) in outbox]


def test_a_fans_comment_turns_sent_in_the_open_log_and_one_dm_arrives(
    connected: Connected,
    sandbox: SandboxProcess,
    worker: Service,
    db_url: str,
    test_env: dict[str, str],
) -> None:
    page = connected.page
    create_campaign(page, name="Lemon loaf recipe", keyword="RECIPE", activate=True)
    wait_past_activation(db_url)
    page.goto("/log")
    expect(page.locator("#log-empty")).to_be_visible()
    # A marker that a reload would wipe: the row must arrive by polling, not by navigation.
    page.evaluate("window.__sameDocument = 'yes'")

    comment = sandbox.admin.fan_comment("jane.doe", LEMON_REEL, "RECIPE please! 🍋")
    row = page.locator("#log-rows tr.log-row", has_text="@jane.doe")
    expect(row).to_have_count(1, timeout=DELIVERED_WITHIN_MS)
    expect(row.locator(".leg-pr .state")).to_have_attribute(
        "data-state", "SENT", timeout=DELIVERED_WITHIN_MS
    )
    expect(row).to_contain_text("RECIPE please! 🍋")
    expect(row).to_contain_text("Lemon loaf recipe")
    expect(page.locator("#log-empty")).to_have_count(0)
    assert page.evaluate("window.__sameDocument") == "yes"

    inbox = sandbox.admin.inbox("jane.doe")["messages"]
    assert [(m["kind"], m["comment_id"]) for m in inbox] == [("private_reply", comment["id"])]
    assert sandbox.admin.comment_stats(comment["id"])["private_replies_delivered"] == 1

    # Filters live in the URL and in the history: FAILED hides the row, Back brings it again.
    page.select_option("#state", "FAILED")
    expect(page).to_have_url(re.compile(r"/log\?state=FAILED$"))
    expect(row).to_have_count(0)
    expect(page.locator("#log-empty")).to_contain_text("No delivery matches these filters")
    page.go_back()
    expect(page).to_have_url(re.compile(r"/log$"))
    expect(page.locator("#log-rows tr.log-row", has_text="@jane.doe")).to_have_count(1)
    page.fill("#q", "@jane")
    expect(page).to_have_url(re.compile(r"/log\?q=%40jane$"))
    expect(page.locator("#log-rows tr.log-row")).to_have_count(1)

    # The row opens its timeline: the ledger entry, the decision, the call to Instagram. Its
    # time is the way in, so it looks like the page's other links.
    opener = page.locator("#log-rows tr.log-row a.log-open")
    link_color = page.locator("#export-csv").evaluate("a => getComputedStyle(a).color")
    expect(opener).to_have_css("color", link_color)
    opener.click()
    expect(page.locator("#pr-state .state")).to_have_attribute("data-state", "SENT")
    # Either path may see it first on a busy machine: the webhook, or the reconciler's first
    # sweep of the newly active campaign's account; the ledger keeps one row either way.
    expect(page.locator("#seen-via")).to_have_attribute("data-via", re.compile("webhook|poll"))
    expect(page.locator("#ledger")).to_contain_text("RECIPE please! 🍋")
    expect(page.locator("#decision")).to_contain_text("“Lemon loaf recipe” answered")
    expect(page.locator("#attempts tbody tr")).to_have_count(1)
    expect(page.locator("#attempts tbody tr")).to_have_attribute("data-classification", "sent")

    # The overview counts it.
    page.goto("/")
    expect(page.locator("#stat-sent .stat-number")).to_have_text("1")
    expect(page.locator('#per-account tr[data-account="sunny.bakes"] .n-sent')).to_have_text("1")
    assert _rows(db_url, "SELECT pr_state, pr_attempts FROM dm_logs") == [("SENT", 1)]

    # Still exactly one DM once the worker has nothing left that could send another: a late
    # duplicate (a redelivered webhook, a second job for the row) would have arrived by now.
    wait_until(
        lambda: not _work_left(test_env["REDIS_URL"], db_url),
        timeout=DELIVERED_WITHIN_MS / 1000,
        interval=0.5,
        what="the worker to finish every job but its crons",
    )
    inbox = sandbox.admin.inbox("jane.doe")["messages"]
    assert [(m["kind"], m["comment_id"]) for m in inbox] == [("private_reply", comment["id"])]
    stats = sandbox.admin.comment_stats(comment["id"])
    assert (stats["send_requests"], stats["private_replies_delivered"]) == (1, 1)
