"""Retrying from the delivery log in Chromium, against real web, worker and sandbox processes:
a double-clicked Retry retries once; an UNCONFIRMED row shows its evidence and is sent again
only after an explicit confirmation, and Instagram's "already replied" answer then records it
SENT without a second DM; "check the conversation again" can settle it instead; another
workspace cannot open any of it by URL; signing out ends the session.
"""

from __future__ import annotations

import re
from typing import Any

import psycopg
from playwright.sync_api import Browser, Page, expect

from tests.e2e.flows import Connected, create_campaign, sign_out, sign_up, wired
from tests.support.dashboard import LEMON_REEL
from tests.support.log_data import wait_past_activation
from tests.support.processes import Service
from tests.support.sandbox_process import SandboxProcess

# What the worker does (a webhook to a sent DM) takes a second or two; a loaded two-core machine
# can stretch that tenfold, and only a stuck pipeline should fail.
WITHIN_MS = 60_000
# The worker looks in the conversation 10 s after an ambiguous send; the timeline polls every 3 s.
EVIDENCE_WITHIN_MS = 60_000


def _rows(db_url: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(db_url) as conn:
        return list(conn.execute(sql, params).fetchall())


def _comment_and_wait(
    page: Page, sandbox: SandboxProcess, state: str, fan: str = "jane.doe"
) -> tuple[str, Any]:
    """A fan comments RECIPE; returns the comment id and its row in the open log."""
    comment = sandbox.admin.fan_comment(fan, LEMON_REEL, "RECIPE please")
    row = page.locator("#log-rows tr.log-row", has_text=f"@{fan}")
    expect(row.locator(".leg-pr .state")).to_have_attribute("data-state", state, timeout=WITHIN_MS)
    return str(comment["id"]), row


def _unconfirmed_timeline(
    page: Page, sandbox: SandboxProcess, db_url: str
) -> tuple[str, dict[str, Any]]:
    """A live campaign, a comment whose DM is delivered but answered with code 1 (we cannot
    know it arrived), and a Conversations API that refuses the worker's look, so the row
    stays UNCONFIRMED for the creator; ends on its timeline once the evidence is shown.
    Returns the comment id and the conversations fault."""
    create_campaign(page, activate=True)
    wait_past_activation(db_url)
    sandbox.admin.add_fault("messages", "deliver_then_error", code=1, times=1)
    blocked = sandbox.admin.add_fault("conversations", "reject", code=100, message="Unsupported")
    page.goto("/log")
    comment_id, row = _comment_and_wait(page, sandbox, "UNCONFIRMED")
    expect(row.locator("button[data-action=retry]")).to_have_count(0)  # no one-click retry
    row.locator("a[data-action=review]").click()
    expect(page.locator("#evidence")).to_contain_text(
        "the check itself failed", timeout=EVIDENCE_WITHIN_MS
    )
    return comment_id, blocked


def test_a_double_clicked_retry_retries_once(
    connected: Connected, sandbox: SandboxProcess, worker: Service, db_url: str
) -> None:
    page = connected.page
    create_campaign(page, activate=True)
    wait_past_activation(db_url)
    # 551 "user unavailable" is a final refusal: the row fails at once, nothing was delivered.
    sandbox.admin.add_fault("messages", "reject", code=551, times=1, account="sunny.bakes")
    page.goto("/log")
    comment_id, row = _comment_and_wait(page, sandbox, "FAILED")
    expect(row.locator(".leg-pr")).to_contain_text("can't receive messages")

    [(log_id,)] = _rows(db_url, "SELECT id FROM dm_logs")
    wired(row)  # the poll swapped the row in: its Retry is htmx's once the swap has settled

    # A double click as the server sees it: the same form, with the same one-time key, sent
    # twice before the first answer is back. htmx itself sends a second click only after the
    # first swap (the form is gone by then), so the second copy goes out as a fetch of the
    # same form data while htmx's own request is still in flight.
    answers: list[tuple[str, int]] = []
    page.on(
        "response",
        lambda r: (
            answers.append((r.request.method, r.status))
            if r.url.endswith(f"/log/{log_id}/retry")
            else None
        ),
    )
    echoed = page.evaluate(
        """async (id) => {
            const form = document.querySelector(`#log-${id} form[action$="/retry"]`);
            const body = new URLSearchParams(new FormData(form));
            form.querySelector('button[data-action=retry]').click();
            const headers = {'HX-Request': 'true'};
            const r = await fetch(form.action, {method: 'POST', body, headers});
            return [r.status, await r.text()];
        }""",
        log_id,
    )
    assert echoed[0] == 200
    assert f'id="log-{log_id}"' in echoed[1]  # the first answer (the row), not a refusal
    expect(row.locator(".leg-pr .state")).to_have_attribute("data-state", "SENT", timeout=WITHIN_MS)
    assert answers == [("POST", 200), ("POST", 200)]  # both copies reached the server

    [(attempts, limit, evidence)] = _rows(
        db_url, "SELECT pr_attempts, pr_attempt_limit, pr_evidence FROM dm_logs"
    )
    assert attempts == 2  # the refused send and one retry
    assert limit == 1 + 3  # one fresh budget granted, once
    assert evidence["manual_retry"]["from_state"] == "FAILED"
    assert _rows(db_url, "SELECT count(*) FROM delivery_attempts WHERE dm_log_id = %s", log_id) == [
        (2,)
    ]
    assert _rows(
        db_url, "SELECT scope, status FROM idempotency_keys WHERE scope LIKE 'delivery.%%'"
    ) == [("delivery.retry", "succeeded")]
    stats = sandbox.admin.comment_stats(comment_id)
    assert stats["send_requests"] == 2
    assert stats["private_replies_delivered"] == 1
    assert len(sandbox.admin.inbox("jane.doe")["messages"]) == 1


def test_an_unconfirmed_row_shows_its_evidence_and_retries_only_when_confirmed(
    connected: Connected, sandbox: SandboxProcess, worker: Service, db_url: str
) -> None:
    page = connected.page
    comment_id, _ = _unconfirmed_timeline(page, sandbox, db_url)
    panel = page.locator("#retry-panel")
    expect(panel).to_contain_text("We may already have sent this — check the conversation")
    expect(page.locator("#evidence")).to_contain_text("Conversation checked")

    # Without ticking the confirmation nothing is sent.
    page.click("#retry-unconfirmed")
    expect(page.locator("#confirm-checkbox")).to_have_js_property("validity.valid", False)
    assert _rows(db_url, "SELECT pr_state FROM dm_logs") == [("UNCONFIRMED",)]
    assert _rows(
        db_url, "SELECT count(*) FROM idempotency_keys WHERE scope LIKE 'delivery.%%'"
    ) == [(0,)]

    page.check("#confirm-checkbox")
    page.click("#retry-unconfirmed")
    expect(page).to_have_url(re.compile(r"/log/\d+\?notice=retried$"))
    # Instagram answers the retry 100/2534025 (this comment already has its private reply):
    # the first send arrived, so the row is SENT, confirmed — and no second DM exists.
    expect(page.locator("#pr-state .state")).to_have_attribute(
        "data-state", "SENT", timeout=WITHIN_MS
    )
    expect(page.locator("#state-sentence")).to_contain_text("Instagram later confirmed it arrived")
    expect(page.locator("#evidence")).to_contain_text("Confirmed delivered")
    [(state, proof)] = _rows(db_url, "SELECT pr_state, pr_evidence FROM dm_logs")
    assert state == "SENT"
    assert proof["confirmed_by"] == "meta_already_used"
    assert proof["manual_retry"]["from_state"] == "UNCONFIRMED"
    assert len(sandbox.admin.inbox("jane.doe")["messages"]) == 1
    assert sandbox.admin.comment_stats(comment_id)["private_replies_delivered"] == 1


def test_check_the_conversation_again_settles_an_unconfirmed_row(
    connected: Connected, sandbox: SandboxProcess, worker: Service, db_url: str
) -> None:
    page = connected.page
    _, blocked = _unconfirmed_timeline(page, sandbox, db_url)
    sandbox.admin.remove_fault(blocked["id"])  # the Conversations API answers again
    page.click("#check-again")
    expect(page).to_have_url(re.compile(r"/log/\d+\?notice=checking$"))
    expect(page.locator("#pr-state .state")).to_have_attribute(
        "data-state", "SENT", timeout=WITHIN_MS
    )
    expect(page.locator("#state-sentence")).to_contain_text("found in the conversation")
    assert _rows(db_url, "SELECT pr_state, pr_evidence->>'confirmed_by' FROM dm_logs") == [
        ("SENT", "conversations_api")
    ]
    assert len(sandbox.admin.inbox("jane.doe")["messages"]) == 1


def test_another_workspace_cannot_open_rows_campaigns_or_accounts_and_logout_ends_it(
    connected: Connected, browser: Browser, base_url: str, db_url: str
) -> None:
    page = connected.page
    campaign_id = create_campaign(page)
    with psycopg.connect(db_url) as conn:
        [(workspace_id,)] = conn.execute("SELECT workspace_id FROM campaigns").fetchall()
        [(log_id,)] = conn.execute(
            "INSERT INTO dm_logs (workspace_id, account_id, campaign_id, trigger_kind, trigger_id,"
            " recipient_username, trigger_text, pr_state, pr_attempts)"
            " VALUES (%s, %s, %s, 'comment', '17800000000000001', 'jane.doe', 'RECIPE', "
            "'FAILED', 1) RETURNING id",
            (workspace_id, connected.account_id, campaign_id),
        ).fetchall()
    page.goto(f"/log/{log_id}")
    expect(page.locator("#retry-button")).to_be_visible()

    other = browser.new_context(base_url=base_url)
    try:
        rival = other.new_page()
        sign_up(rival, "rival@example.com")
        for path in (
            f"/log/{log_id}",
            f"/campaigns/{campaign_id}",
            f"/accounts/{connected.account_id}",
        ):
            response = rival.goto(path)
            assert response is not None
            assert response.status == 404, path
            expect(rival.locator("h1")).to_have_text("Not found")
        rival.goto("/log")
        expect(rival.locator("#log-rows tr")).to_have_count(0)
        expect(rival.locator("#log-empty")).to_be_visible()
    finally:
        other.close()

    sign_out(page)
    page.goto(f"/log/{log_id}")
    expect(page).to_have_url(re.compile(rf"/login\?next=/log/{log_id}$"))
    expect(page.locator("details.user-menu")).to_have_count(0)
