"""A timeline left open follows its row: when the inbox check proves an UNCONFIRMED DM
arrived (or a retried one is sent), the page says SENT and stops offering "Send it again"
without a reload."""

from __future__ import annotations

import psycopg
from playwright.sync_api import expect

from tests.e2e.flows import Connected, create_campaign

# The timeline re-asks every 3 s; a busy machine gets far more than that.
WITHIN_MS = 30_000


def _row(db_url: str, account_id: int, campaign_id: int, state: str) -> int:
    with psycopg.connect(db_url) as conn:
        [(workspace_id,)] = conn.execute(
            "SELECT workspace_id FROM campaigns WHERE id = %s", (campaign_id,)
        ).fetchall()
        [(log_id,)] = conn.execute(
            "INSERT INTO dm_logs (workspace_id, account_id, campaign_id, trigger_kind,"
            " trigger_id, recipient_id, recipient_username, trigger_text, pr_state,"
            " pr_attempts, deadline_at) VALUES (%s, %s, %s, 'comment', %s, '99123',"
            " 'jane.doe', 'RECIPE please', %s, 1, now() + interval '6 days') RETURNING id",
            (workspace_id, account_id, campaign_id, f"17800000000{state[:3]}", state),
        ).fetchall()
    return int(log_id)


def _set(db_url: str, log_id: int, sql: str) -> None:
    with psycopg.connect(db_url) as conn:
        conn.execute(sql + ", updated_at = now() WHERE id = %s", (log_id,))


def test_an_open_timeline_shows_the_inbox_checks_proof_without_a_reload(
    connected: Connected, db_url: str
) -> None:
    page = connected.page
    campaign_id = create_campaign(page)
    unconfirmed = _row(db_url, connected.account_id, campaign_id, "UNCONFIRMED")
    page.goto(f"/log/{unconfirmed}")
    expect(page.locator("#retry-unconfirmed")).to_be_visible()
    page.check("#confirm-checkbox")  # half-way through the form when the proof arrives
    _set(
        db_url,
        unconfirmed,
        "UPDATE dm_logs SET pr_state = 'SENT', pr_sent_at = now(),"
        ' pr_evidence = \'{"confirmed_by": "conversations_api"}\'::jsonb',
    )
    expect(page.locator("#pr-state .state")).to_have_attribute(
        "data-state", "SENT", timeout=WITHIN_MS
    )
    expect(page.locator("#retry-unconfirmed")).to_have_count(0)
    expect(page.locator("#state-sentence")).to_contain_text("found in the conversation")


def test_an_open_timeline_follows_a_retry_until_it_is_sent(
    connected: Connected, db_url: str
) -> None:
    page = connected.page
    campaign_id = create_campaign(page)
    pending = _row(db_url, connected.account_id, campaign_id, "PENDING")
    page.goto(f"/log/{pending}")
    expect(page.locator("#pr-state .state")).to_have_attribute("data-state", "PENDING")
    _set(db_url, pending, "UPDATE dm_logs SET pr_state = 'SENT', pr_sent_at = now()")
    expect(page.locator("#pr-state .state")).to_have_attribute(
        "data-state", "SENT", timeout=WITHIN_MS
    )
    expect(page.locator("#pr-state .state")).to_have_text("Sent")
