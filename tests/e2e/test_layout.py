"""Every screen fits: at 1280×800 (a laptop) and 390×844 (a phone), for an owner, a member,
someone signed out and a fan on the sandbox, no page scrolls sideways, no table's wrapper
scrolls sideways, and nothing inside a card sits past the card's edge, with data full of
long unbroken words and ids as Instagram hands them out.

Each page is saved as `test-results/layout/<page>-<width>.png` (full page), stable names to
compare by eye between runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
from playwright.sync_api import Browser, Page, expect

from tests.e2e.conftest import CDN_PATTERN
from tests.e2e.flows import Connected, create_campaign
from tests.e2e.test_team import _invite_and_copy_the_link, _join_with_a_new_account
from tests.support.sandbox_process import SandboxProcess

SIZES = {"1280": {"width": 1280, "height": 800}, "390": {"width": 390, "height": 844}}
LONG_WORD = "RECIPEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEE"
# What a message id from Meta looks like: one unbroken token, longer than a phone is wide.
MESSAGE_ID = (
    "aWdfZAG1faXRlbToxOklHTWVzc2FnZAUlEOjE3ODQxNDAyNzQ0MDY3NjAy"
    "OjM0MDI4MjM2Njg0MTcxMDMwMDk0OTEyODE3NzQ2NjY0OTk3MzY0"
)
MEMBER = "helper@example.com"

# Where a page is wider than the window, where a scroll container scrolls sideways, and
# which visible elements stick out of their card.
_OVERFLOWS = """() => {
  const name = el => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '')
    + (typeof el.className === 'string' && el.className
       ? '.' + el.className.trim().split(/\\s+/).join('.') : '');
  const scrolls = el => ['auto', 'scroll'].includes(getComputedStyle(el).overflowX);
  const found = [];
  const doc = document.documentElement;
  if (doc.scrollWidth > window.innerWidth)
    found.push(`page ${doc.scrollWidth}px wide in ${window.innerWidth}px`);
  for (const el of document.body.querySelectorAll('*')) {
    if (scrolls(el) && el.scrollWidth > el.clientWidth + 1)
      found.push(`${name(el)} scrolls sideways (${el.scrollWidth} > ${el.clientWidth})`);
  }
  for (const card of document.querySelectorAll('.card')) {
    const box = card.getBoundingClientRect();
    if (box.width === 0) continue;
    for (const el of card.querySelectorAll('*')) {
      const r = el.getBoundingClientRect();
      if (r.width === 0 || r.height === 0 || el.closest('.sr-only')) continue;
      // Inside a scroll container the container's own report says it all.
      let up = el.parentElement, scrolled = false;
      for (; up && up !== card.parentElement; up = up.parentElement)
        if (scrolls(up)) scrolled = true;
      if (scrolled) continue;
      if (r.right > box.right + 1 || r.left < box.left - 1)
        found.push(`${name(el)} sticks out of ${name(card)}`
          + ` (${Math.round(r.left)}..${Math.round(r.right)}`
          + ` in ${Math.round(box.left)}..${Math.round(box.right)})`);
    }
  }
  return found;
}"""


def check_fits(page: Page, name: str, artifacts_dir: Path) -> list[str]:
    """Every size: the page's overflows (empty when it fits), with a screenshot of each."""
    problems: list[str] = []
    folder = artifacts_dir / "layout"
    folder.mkdir(parents=True, exist_ok=True)
    for label, size in SIZES.items():
        page.set_viewport_size(size)
        page.wait_for_load_state("load")
        page.screenshot(path=str(folder / f"{name}-{label}.png"), full_page=True)
        found: list[str] = page.evaluate(_OVERFLOWS)
        problems.extend(f"{name} at {label}px: {problem}" for problem in found)
    return problems


def _rows(db_url: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(db_url) as conn:
        return list(conn.execute(sql, params).fetchall())


def _seed(db_url: str, account_id: int, campaign_id: int) -> dict[str, int]:
    """A delivery in each state worth a look, with long words, ids and Meta's messages; and
    a miss. Returns the ids by state."""
    with psycopg.connect(db_url) as conn:
        [(workspace_id,)] = conn.execute(
            "SELECT workspace_id FROM campaigns WHERE id = %s", (campaign_id,)
        ).fetchall()
        ids: dict[str, int] = {}
        for n, (state, code, message) in enumerate(
            [
                ("SENT", None, None),
                ("FAILED", 551, "This person isn't available right now. " * 3),
                ("UNCONFIRMED", None, "The request timed out after 10 s; it may have arrived."),
                ("SKIPPED_DEDUP", None, None),
            ]
        ):
            [(log_id,)] = conn.execute(
                "INSERT INTO dm_logs (workspace_id, account_id, campaign_id, trigger_kind,"
                " trigger_id, media_id, recipient_id, recipient_username, trigger_text,"
                " pr_state, pr_attempts, pr_error_code, pr_error_message, pr_message_id,"
                " pr_sent_at, pub_state, pub_text)"
                " VALUES (%s, %s, %s, 'comment', %s, '17900000000000001', '9912345678901234',"
                " %s, %s, %s, 1, %s, %s, %s, CASE WHEN %s = 'SENT' THEN now() END, 'PENDING',"
                " 'Sent you a DM!') RETURNING id",
                (
                    workspace_id,
                    account_id,
                    campaign_id,
                    f"1780000000000000{n}",
                    "a.fan.with.a.rather.long.username_2024",
                    f"{LONG_WORD} please!! 🍋🍋🍋 I have been waiting for this one all week",
                    state,
                    code,
                    message,
                    MESSAGE_ID if state == "SENT" else None,
                    state,
                ),
            ).fetchall()
            ids[state] = log_id
            conn.execute(
                "INSERT INTO delivery_attempts (dm_log_id, leg, attempt_no, request_kind,"
                " latency_ms, http_status, meta_code, meta_subcode, fbtrace_id, error_message,"
                " classification) VALUES (%s, 'private_reply', 1, 'template', 812, %s, %s, %s,"
                " %s, %s, %s)",
                (
                    log_id,
                    400 if code else 200,
                    code,
                    2534014 if code else None,
                    "AbCdEfGhIjKlMnOpQrStUvWx" if code else None,
                    message,
                    "rejected" if code else "sent",
                ),
            )
        conn.execute(
            "INSERT INTO comments (account_id, comment_id, media_id, text, commenter_id,"
            " commenter_username, commented_at, first_seen_via, outcome, miss_reason)"
            " VALUES (%s, '17999999999999999', '17900000000000001', %s, '9912345678901235',"
            " 'another.fan.with.a.long.name_99', now(), 'webhook', 'missed', 'no_keyword')",
            (account_id, f"{LONG_WORD}?? so good"),
        )
    return ids


def _the_editor_on_a_phone(owner: Page) -> None:
    """The form first, the preview after it; thumbnails' labels fit; activating is the
    primary button; "Try a comment" is a link away."""
    owner.set_viewport_size(SIZES["390"])
    owner.goto("/campaigns/new")
    expect(owner.locator(".media-item").first).to_be_visible()
    form_top = owner.locator("#campaign-form .card").first.bounding_box()
    preview_top = owner.locator(".editor-side").bounding_box()
    assert form_top is not None
    assert preview_top is not None
    assert preview_top["y"] > form_top["y"], "the preview comes after the form on a phone"
    too_wide: list[str] = owner.evaluate(
        """() => [...document.querySelectorAll('.thumb')]
            .filter(t => t.querySelector('.thumb-kind').scrollWidth > t.clientWidth)
            .map(t => t.textContent.trim())"""
    )
    assert too_wide == []
    expect(owner.locator(".submit-row button").first).to_have_attribute("id", "save-activate")
    expect(owner.locator("#try-from-editor")).to_be_visible()


def test_every_page_fits_a_laptop_and_a_phone(  # noqa: PLR0917 - fixtures
    connected: Connected,
    browser: Browser,
    base_url: str,
    db_url: str,
    sandbox: SandboxProcess,
    artifacts_dir: Path,
) -> None:
    owner = connected.page
    campaign_id = create_campaign(
        owner, name="Lemon drizzle loaf, the recipe everyone keeps asking for", keyword="RECIPE"
    )
    ids = _seed(db_url, connected.account_id, campaign_id)
    problems: list[str] = []
    owner_pages = {
        "overview": "/",
        "accounts": "/accounts",
        "account": f"/accounts/{connected.account_id}",
        "campaigns": "/campaigns",
        "campaign-new": "/campaigns/new",
        "campaign": f"/campaigns/{campaign_id}",
        "log": "/log",
        "misses": "/log/misses",
        "team": "/team",
        "setup": "/setup",
        "try": "/campaigns/try",
        **{f"timeline-{state.lower()}": f"/log/{log_id}" for state, log_id in ids.items()},
    }
    for name, path in owner_pages.items():
        owner.set_viewport_size(SIZES["1280"])
        owner.goto(path)
        problems += check_fits(owner, f"owner-{name}", artifacts_dir)

    _the_editor_on_a_phone(owner)

    link = _invite_and_copy_the_link(owner, base_url, MEMBER)
    member_context = browser.new_context(base_url=base_url)
    try:
        member = member_context.new_page()
        member.route(CDN_PATTERN, lambda route: route.abort())
        member.goto(link)
        problems += check_fits(member, "invite", artifacts_dir)
        _join_with_a_new_account(member, link, base_url)
        # A member sees the post the campaign watches, not a request to choose an account.
        member.goto(f"/campaigns/{campaign_id}")
        expect(member.locator("#media-picker .media-item input:checked")).to_have_count(1)
        expect(member.locator("[data-media-problem]")).to_have_count(0)
        for name, path in {
            "campaign": f"/campaigns/{campaign_id}",
            "log": "/log",
            "timeline-failed": f"/log/{ids['FAILED']}",
            "team": "/team",
        }.items():
            member.set_viewport_size(SIZES["1280"])
            member.goto(path)
            problems += check_fits(member, f"member-{name}", artifacts_dir)
    finally:
        member_context.close()

    stranger_context = browser.new_context(base_url=base_url)
    try:
        stranger = stranger_context.new_page()
        for name in ("login", "signup"):
            stranger.goto(f"/{name}")
            expect(stranger.locator("form")).to_be_visible()
            problems += check_fits(stranger, name, artifacts_dir)
        fan = "jane.doe"
        [(post,)] = _rows(db_url, "SELECT media_id FROM campaigns WHERE id = %s", campaign_id)
        sandbox.admin.fan_comment(fan, post, f"{LONG_WORD} please")
        for name, path in {
            "home": "/",
            "fan": f"/fan?fan={fan}",
            "fan-post": f"/fan/post/{post}?fan={fan}",
            "fan-inbox": f"/fan/inbox?fan={fan}",
        }.items():
            stranger.goto(f"{sandbox.base_url}{path}")
            problems += check_fits(stranger, f"sandbox-{name}", artifacts_dir)
    finally:
        stranger_context.close()

    assert problems == [], "\n".join(problems)
