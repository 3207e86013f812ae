"""The delivery log through the real app: filters, keyset pages that hold still while rows
arrive, the live poll, timelines, misses, workspace isolation, and the retry buttons with
their idempotency keys (same token twice → one retry; racing requests → one wins), CSRF and
roles.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from urllib.parse import urlencode

import pytest
from sqlalchemy import func, select, text

from app.db.models import (
    AttemptClass,
    IdempotencyKey,
    Leg,
    LegState,
    MessageKind,
    MissReason,
    TriggerKind,
)
from app.delivery.recovery.manual_retry import mark_retry
from app.delivery_log.filters import LIVE_OVERLAP, Key, LiveWindow, LogFilter, MissFilter
from app.delivery_log.misses import fetch_misses
from app.delivery_log.queries import fetch_new, fetch_page
from app.operations.idempotency import Finished, InProgress, KeyRequest, Ran, Refused, run_once
from app.resources import Resources
from app.settings import Settings
from tests.support.dashboard import csrf_token, tokens
from tests.support.log_data import (
    Creator,
    add_attempt,
    add_campaign,
    add_comment,
    add_log,
    add_logs,
    add_member,
    log_row,
    log_values,
    signed_in_as,
    signed_in_creator,
)

HTML = {"accept": "text/html"}
HTMX = {"HX-Request": "true", "accept": "text/html"}


@pytest.fixture
async def owner(
    settings: Settings, resources: Resources, test_env: dict[str, str]
) -> AsyncIterator[Creator]:
    async with signed_in_creator(settings, resources) as creator:
        yield creator


@pytest.fixture
async def other(settings: Settings, resources: Resources, owner: Creator) -> AsyncIterator[Creator]:
    """A second workspace, with its own account and rows."""
    async with signed_in_creator(settings, resources, "north") as creator:
        yield creator


def _row_ids(html: str) -> list[int]:
    return [int(m) for m in re.findall(r'<tr id="log-(\d+)"', html)]


async def _jobs(resources: Resources) -> int:
    """Jobs waiting or scheduled in the delivery queue."""
    return await resources.queue.count("incomplete")


# --- filters and pages ---------------------------------------------------------------------


async def test_filters_narrow_the_log(resources: Resources, owner: Creator) -> None:
    now = datetime.now(UTC)
    second = await add_campaign(resources, owner.workspace_id, owner.account_id, "Starter")
    failed = await add_log(resources, owner, state=LegState.FAILED, username="marco_rossi")
    dedup = await add_log(resources, owner, state=LegState.SKIPPED_DEDUP, campaign_id=second)
    quota = await add_log(resources, owner, state=LegState.SKIPPED_QUOTA)
    sent = await add_log(
        resources, owner, state=LegState.SENT, text="100% the best_recipe", username="olga"
    )
    old = await add_log(resources, owner, created_at=now - timedelta(days=3))

    async def ids(**params: str) -> list[int]:
        async with resources.sessionmaker() as session:
            page = await fetch_page(session, owner.workspace_id, LogFilter.parse(params))
        return [row.id for row in page.rows]

    assert await ids() == [sent, quota, dedup, failed, old]
    assert await ids(state="FAILED") == [failed]
    assert await ids(state="skipped") == [quota, dedup]
    assert await ids(state="SKIPPED_DEDUP") == [dedup]
    assert await ids(campaign=str(second)) == [dedup]
    assert await ids(q="marco") == [failed]
    assert await ids(q="@olga") == [sent]
    assert await ids(q="@best") == []  # @ searches usernames only
    assert await ids(q="100%") == [sent]  # LIKE wildcards are literal
    assert await ids(q="best_r") == [sent]
    assert await ids(q="he_b") == []  # "_" is no wildcard (it would match "he b")
    day = (now - timedelta(days=3)).date().isoformat()
    assert await ids(**{"from": day, "to": day}) == [old]
    assert await ids(**{"from": now.date().isoformat()}) == [sent, quota, dedup, failed]
    assert await ids(account=str(owner.account_id), state="SENT") == [sent, old]

    bad = LogFilter.parse({"state": "NOPE", "from": "yesterday", "campaign": "x"})
    assert bad.items() == []
    assert len(bad.problems) == 3

    page = await owner.client.get("/log?state=FAILED&q=marco", headers=HTML)
    assert page.status_code == 200
    assert _row_ids(page.text) == [failed]
    assert page.headers["vary"] == "HX-Request"
    assert 'id="log-filters"' in page.text
    partial = await owner.client.get("/log?state=FAILED", headers=HTMX)
    assert 'id="log-filters"' not in partial.text
    assert _row_ids(partial.text) == [failed]
    assert partial.headers["hx-push-url"] == "/log?state=FAILED"
    restore = await owner.client.get(
        "/log?state=FAILED", headers={**HTMX, "HX-History-Restore-Request": "true"}
    )
    assert 'id="log-filters"' in restore.text  # history restore gets the full page


async def test_keyset_pages_hold_still_while_rows_arrive(
    resources: Resources, owner: Creator
) -> None:
    start = datetime.now(UTC) - timedelta(hours=1)
    # Same created_at for pairs of rows: the id breaks ties.
    original = await add_logs(
        resources,
        [log_values(owner, created_at=start + timedelta(seconds=n // 2)) for n in range(120)],
    )
    newest_first = list(reversed(original))
    seen: list[int] = []
    async with resources.sessionmaker() as session:
        page = await fetch_page(session, owner.workspace_id, LogFilter())
        assert page.live is not None
        window = page.live
        seen += [row.id for row in page.rows]
        # Rows arrive between page loads, one stamped before the first page's newest row (its
        # transaction committed late).
        arrived = await add_logs(
            resources,
            [log_values(owner) for _ in range(20)]
            + [log_values(owner, created_at=page.rows[0].created_at - timedelta(seconds=1))],
        )
        while page.older is not None:
            page = await fetch_page(session, owner.workspace_id, LogFilter(), before=page.older)
            seen += [row.id for row in page.rows]
        assert seen == newest_first  # no row twice, none skipped, order kept

        # The first page's poller finds exactly the rows that arrived, the late one included.
        new = await fetch_new(session, owner.workspace_id, LogFilter(), window)
        assert sorted(row.id for row in new) == sorted(arrived)
        window = window.advance([row.key for row in new])
        assert await fetch_new(session, owner.workspace_id, LogFilter(), window) == []

        # "Newer" from the second page lands on the (current) first page.
        first = await fetch_page(session, owner.workspace_id, LogFilter())
        two = await fetch_page(session, owner.workspace_id, LogFilter(), before=first.older)
        assert two.newer is not None
        assert not two.first
        back = await fetch_page(session, owner.workspace_id, LogFilter(), after=two.newer)
        assert [r.id for r in back.rows] == [r.id for r in first.rows]
        assert back.first
        oldest = await fetch_page(session, owner.workspace_id, LogFilter(), before=Key(0, 0))
        assert oldest.rows == []
    assert Key.decode("not a cursor") is None
    assert Key.decode(Key.of(start, 7).encode()) == Key.of(start, 7)


def test_live_window_trails_the_newest_row_and_survives_the_url() -> None:
    now = datetime.now(UTC)
    rows = [Key.of(now - timedelta(seconds=s), 100 - s) for s in (0, 2, 30)]
    window = LiveWindow.start(rows, page_full=False)
    assert window.floor == Key.of(now - LIVE_OVERLAP, 0)
    assert window.shown == (rows[0], rows[1])
    assert LiveWindow.decode(window.encode()) == window
    later = window.advance([Key.of(now + timedelta(seconds=60), 500)])
    assert later.shown == (Key.of(now + timedelta(seconds=60), 500),)
    assert LiveWindow.decode("garbage") is None
    full = LiveWindow.start(rows, page_full=True)
    assert full.floor == Key.of(now - LIVE_OVERLAP, 0)  # newest - overlap is above row 3


async def test_the_poller_adds_new_rows_and_redraws_changed_ones(
    resources: Resources, owner: Creator, other: Creator
) -> None:
    pending = await add_log(resources, owner, state=LegState.PENDING, username="jane.doe")
    sent = await add_log(resources, owner, state=LegState.SENT, username="marco_rossi")
    page = await owner.client.get("/log", headers=HTML)
    assert _row_ids(page.text) == [sent, pending]
    poll_url = re.search(r'hx-get="(/log/updates[^"]*)"', page.text)
    assert poll_url
    url = poll_url.group(1).replace("&amp;", "&")
    live = re.findall(r'name="live" value="([^"]+)"', page.text)
    assert live == [f"{pending}:{(await _version(resources, pending))}"]  # SENT rows are settled

    url += "&" + urlencode([("live", value) for value in live])  # as hx-include adds them
    quiet = await owner.client.get(url, headers=HTMX)
    assert quiet.status_code == 204

    await _set_state(resources, pending, LegState.SENT)
    newer = await add_log(resources, owner, state=LegState.PENDING, username="olga.petrova")
    await add_log(resources, other, state=LegState.PENDING, username="not.mine")
    update = await owner.client.get(url, headers=HTMX)
    assert update.status_code == 200
    assert 'hx-swap-oob="afterbegin:#log-rows"' in update.text
    assert f'<tr id="log-{newer}"' in update.text
    assert "not.mine" not in update.text
    changed = re.search(rf'<tr id="log-{pending}"[^>]*hx-swap-oob="true"', update.text)
    assert changed
    assert 'data-state="SENT"' in changed.group(0)
    assert f'<tr id="log-{sent}"' not in update.text  # unchanged rows are not sent again
    # The next poll carries the advanced window: the new row is not added twice.
    next_url = re.search(r'hx-get="(/log/updates[^"]*)"', update.text)
    assert next_url
    again = await owner.client.get(next_url.group(1).replace("&amp;", "&"), headers=HTMX)
    assert again.status_code == 204


async def _version(resources: Resources, dm_log_id: int) -> int:
    from app.delivery_log.filters import to_micros

    return to_micros((await log_row(resources, dm_log_id)).updated_at)


async def _set_state(resources: Resources, dm_log_id: int, state: LegState) -> None:
    async with resources.sessionmaker() as session, session.begin():
        await session.execute(
            text("UPDATE dm_logs SET pr_state = :s, updated_at = now() WHERE id = :id"),
            {"s": state.value, "id": dm_log_id},
        )


# --- a row's timeline and the misses view --------------------------------------------------


async def test_a_timeline_shows_ledger_decision_attempts_and_evidence(
    resources: Resources, owner: Creator
) -> None:
    decision = {
        "campaign_id": owner.campaign_id,
        "campaign_name": "Lemon loaf",
        "matched_keyword": "recipe",
        "miss_reason": None,
        "considered": [
            {"campaign_id": owner.campaign_id, "name": "Lemon loaf", "verdict": "won",
             "keyword": "recipe"},
            {"campaign_id": 999, "name": "Any post recipe", "verdict": "lost", "keyword": "recipe",
             "lost_to": "Lemon loaf"},
            {"campaign_id": 998, "name": "Giveaway", "verdict": "excluded", "keyword": "free"},
        ],
    }  # fmt: skip
    comment = await add_comment(
        resources, owner.account_id, text="RECIPE please 🍋", decision=decision
    )
    checked = datetime.now(UTC).isoformat()
    row = await add_log(
        resources,
        owner,
        state=LegState.UNCONFIRMED,
        comment_row_id=comment,
        pr_error_message=(
            "Instagram answered with an error that does not say whether the message went "
            "out (a fault on its side), so it may have been delivered"
        ),
        pr_evidence={
            "inbox_check": {
                "checked_at": checked,
                "result": "not_found",
                "detail": "not found in the last 20 messages of the conversation",
            }
        },
    )
    await add_attempt(
        resources,
        row,
        http_status=500,
        meta_code=1,
        meta_subcode=99,
        fbtrace_id="AbCdEfG123",
        latency_ms=812,
        error_message="ambiguous: An unknown error occurred",
        classification=AttemptClass.AMBIGUOUS,
    )
    await add_attempt(
        resources,
        row,
        leg=Leg.PUBLIC_REPLY,
        request_kind="reply",
        http_status=200,
        latency_ms=95,
        classification=AttemptClass.SENT,
    )
    page = await owner.client.get(f"/log/{row}", headers=HTML)
    assert page.status_code == 200
    body = page.text
    for expected in (
        "RECIPE please 🍋",
        "@jane.doe",
        'id="seen-via" data-via="webhook">from Instagram',
        "Lemon loaf",
        "also matched, but ranked lower",
        "“Lemon loaf” won",
        "excluded keyword",
        "AbCdEfG123",
        "812 ms",
        "1/99",
        "ambiguous: An unknown error occurred",
        "not found in the last 20 messages of the conversation",
        "We may already have sent this — check the conversation",
        # Why, in the words of its cause; Meta's codes beside it, not in it.
        'id="unconfirmed-why">Instagram answered with an error that does not say whether',
        'id="confirm-checkbox"',
        'id="check-again"',
    ):
        assert expected in body, expected
    # While it may change, the timeline re-asks with its version; unchanged → 204.
    version = await _version(resources, row)
    assert f"/log/{row}?v={version}" in body
    same = await owner.client.get(f"/log/{row}?v={version}", headers=HTMX)
    assert same.status_code == 204
    await _set_state(resources, row, LegState.SENT)
    moved = await owner.client.get(f"/log/{row}?v={version}", headers=HTMX)
    assert moved.status_code == 200
    assert 'data-state="SENT"' in moved.text
    assert 'id="retry-panel"' not in moved.text


async def test_misses_are_searchable_and_filterable(
    resources: Resources, owner: Creator, other: Creator
) -> None:
    base = datetime.now(UTC) - timedelta(minutes=5)
    no_kw = await add_comment(
        resources,
        owner.account_id,
        text="so pretty",
        username="zoe.lefevre",
        missed=MissReason.NO_KEYWORD,
        created_at=base,
        decision={"considered": [{"name": "Lemon loaf", "verdict": "no_keyword"}]},
    )
    excluded = await add_comment(
        resources,
        owner.account_id,
        text="recipe giveaway",
        username="sam.okafor",
        missed=MissReason.EXCLUDED_KEYWORD,
        created_at=base + timedelta(seconds=1),
    )
    await add_comment(resources, owner.account_id, text="RECIPE", created_at=base)  # matched
    own = await add_comment(
        resources,
        owner.account_id,
        text="Sent you a DM!",
        username="sunny.bakes",
        missed=MissReason.OWN_COMMENT,
        created_at=base + timedelta(seconds=2),
    )
    await add_comment(
        resources, other.account_id, text="secret", username="x", missed=MissReason.NO_KEYWORD
    )
    page = await owner.client.get("/log/misses", headers=HTML)
    ids = [int(m) for m in re.findall(r'<tr id="miss-(\d+)"', page.text)]
    assert ids == [excluded, no_kw]
    assert "No keyword of an active campaign" in page.text
    assert "secret" not in page.text
    assert "no keyword in the comment" in page.text  # the considered campaign's verdict
    # The account's own comments (its public replies) are listed only when asked for.
    assert "Your own comments" in page.text
    mine = await owner.client.get("/log/misses?reason=own_comment", headers=HTMX)
    assert re.findall(r'<tr id="miss-(\d+)"', mine.text) == [str(own)]
    reason = await owner.client.get("/log/misses?reason=excluded_keyword", headers=HTMX)
    assert re.findall(r'<tr id="miss-(\d+)"', reason.text) == [str(excluded)]
    search = await owner.client.get("/log/misses?q=%40zoe", headers=HTMX)
    assert re.findall(r'<tr id="miss-(\d+)"', search.text) == [str(no_kw)]

    # Two accounts in one workspace: pages merge both, newest first, page by page.
    second = await _second_account(resources, owner)
    for n in range(7):
        await add_comment(
            resources,
            second if n % 2 else owner.account_id,
            missed=MissReason.NO_KEYWORD,
            created_at=base + timedelta(seconds=10 + n),
        )
    async with resources.sessionmaker() as session:
        walked: list[int] = []
        paged = await fetch_misses(session, owner.workspace_id, MissFilter(), size=4)
        walked += [r.id for r in paged.rows]
        while paged.older:
            paged = await fetch_misses(
                session, owner.workspace_id, MissFilter(), before=paged.older, size=4
            )
            walked += [r.id for r in paged.rows]
        everything = await fetch_misses(session, owner.workspace_id, MissFilter(), size=100)
    assert walked == [r.id for r in everything.rows]
    assert len(walked) == 9


async def _second_account(resources: Resources, creator: Creator) -> int:
    from tests.support.dashboard import add_account

    return await add_account(
        resources, creator.workspace_id, ig_user_id="17841400000000999", username="sunny.two"
    )


async def test_another_workspace_sees_none_of_it(
    resources: Resources, owner: Creator, other: Creator
) -> None:
    mine = await add_log(resources, owner, state=LegState.FAILED)
    theirs = await add_log(resources, other, state=LegState.FAILED, username="north.fan")
    page = await owner.client.get("/log", headers=HTML)
    assert _row_ids(page.text) == [mine]
    assert (await owner.client.get(f"/log/{theirs}", headers=HTML)).status_code == 404
    entry = await owner.client.get(f"/log/{mine}", headers=HTML)
    form = tokens(entry.text, f"/log/{mine}/retry")
    refused = await owner.client.post(f"/log/{theirs}/retry", data=form, headers=HTML)
    assert refused.status_code == 404
    assert (await log_row(resources, theirs)).pr_state is LegState.FAILED
    check = await owner.client.post(f"/log/{theirs}/check", data=form | {"_idem": "c" * 32})
    assert check.status_code == 404
    bulk = await owner.client.post(
        "/log/retry", data={**form, "_idem": "b" * 32, "ids": [str(theirs)]}, follow_redirects=False
    )
    assert bulk.status_code == 303
    assert "retried=0&refused=1" in bulk.headers["location"]
    assert (await log_row(resources, theirs)).pr_state is LegState.FAILED
    # The other workspace's campaign as a filter finds nothing of theirs either.
    filtered = await owner.client.get(f"/log?campaign={other.campaign_id}", headers=HTML)
    assert _row_ids(filtered.text) == []


# --- retry: idempotency composition, CSRF, roles --------------------------------------------


async def test_the_same_token_twice_retries_once_and_answers_the_same(
    resources: Resources, owner: Creator
) -> None:
    row = await add_log(resources, owner, state=LegState.FAILED, pr_attempts=3)
    entry = await owner.client.get(f"/log/{row}", headers=HTML)
    form = {**tokens(entry.text, f"/log/{row}/retry"), "from": "timeline"}
    first = await owner.client.post(f"/log/{row}/retry", data=form, follow_redirects=False)
    second = await owner.client.post(f"/log/{row}/retry", data=form, follow_redirects=False)
    assert first.status_code == second.status_code == 303
    assert first.headers["location"] == second.headers["location"] == f"/log/{row}?notice=retried"
    after = await log_row(resources, row)
    assert after.pr_state is LegState.PENDING
    assert after.pr_attempt_limit == 3 + 3  # one fresh budget, not two
    assert after.pr_evidence
    assert after.pr_evidence["manual_retry"]["from_state"] == "FAILED"
    assert await _jobs(resources) == 1  # enqueued once, after the commit
    async with resources.sessionmaker() as session:
        keys = (
            await session.execute(
                select(IdempotencyKey.scope, IdempotencyKey.status).where(
                    IdempotencyKey.scope != "auth.signup"  # the owner's sign-up has its own
                )
            )
        ).all()
    assert [(scope, status.value) for scope, status in keys] == [("delivery.retry", "succeeded")]
    # The page now says so, and a third click with a fresh token is refused (not FAILED now).
    page = await owner.client.get(f"/log/{row}?notice=retried", headers=HTML)
    assert "Retry queued" in page.text
    assert 'id="retry-button"' not in page.text


async def test_racing_retries_have_one_winner(resources: Resources, owner: Creator) -> None:
    row = await add_log(resources, owner, state=LegState.FAILED)
    entry = await owner.client.get("/log", headers=HTML)
    form = {**tokens(entry.text, f"/log/{row}/retry"), "from": "row"}
    results = await asyncio.gather(
        *(
            owner.client.post(f"/log/{row}/retry", data=form, headers=HTMX, follow_redirects=False)
            for _ in range(5)
        )
    )
    assert {r.status_code for r in results} <= {200, 409}
    swapped = [r.text for r in results if r.status_code == 200]
    assert swapped
    assert all(html == swapped[0] for html in swapped)
    assert f'<tr id="log-{row}"' in swapped[0]
    assert 'data-state="PENDING"' in swapped[0]
    assert (await log_row(resources, row)).pr_attempt_limit == 1 + 3
    assert await _jobs(resources) == 1

    # The same race one level down, with no settling wait: one Ran, the rest InProgress.
    second = await add_log(resources, owner, state=LegState.FAILED)
    request = KeyRequest(scope="delivery.retry", key="r" * 32, fingerprint="f" * 64)

    async def retry_once(session: object) -> Finished | Refused[str]:
        assert hasattr(session, "execute")
        result = await mark_retry(
            session,  # type: ignore[arg-type]
            workspace_id=owner.workspace_id,
            dm_log_id=second,
            confirm_unconfirmed=False,
        )
        await asyncio.sleep(0.2)  # hold the key while the others arrive
        return Finished({"status": result.status.value}) if result.due else Refused("no")

    raced = await asyncio.gather(
        *(run_once(resources.sessionmaker, request, retry_once, settle_s=0) for _ in range(6))
    )
    assert sum(isinstance(r, Ran) for r in raced) == 1
    assert sum(isinstance(r, InProgress) for r in raced) == 5
    assert (await log_row(resources, second)).pr_attempt_limit == 1 + 3

    # Two different tokens racing for one FAILED row: the row's own condition lets one through.
    third = await add_log(resources, owner, state=LegState.FAILED)
    page = await owner.client.get(f"/log/{third}", headers=HTML)
    forms = [
        {**tokens(page.text, f"/log/{third}/retry"), "from": "timeline", "_idem": key * 32}
        for key in ("x", "y")
    ]
    both = await asyncio.gather(
        *(
            owner.client.post(f"/log/{third}/retry", data=f, headers=HTML, follow_redirects=False)
            for f in forms
        )
    )
    assert sorted(r.status_code for r in both) == [303, 409]
    assert "cannot be retried" in next(r.text for r in both if r.status_code == 409)


async def test_an_unconfirmed_row_needs_the_confirmation(
    resources: Resources, owner: Creator
) -> None:
    row = await add_log(resources, owner, state=LegState.UNCONFIRMED)
    table = await owner.client.get("/log", headers=HTML)
    assert f'href="/log/{row}#retry-panel" data-action="review"' in table.text
    assert f'action="/log/{row}/retry"' not in table.text  # no one-click retry in the table
    entry = await owner.client.get(f"/log/{row}", headers=HTML)
    form = {**tokens(entry.text, f"/log/{row}/retry"), "from": "timeline"}
    unconfirmed = await owner.client.post(f"/log/{row}/retry", data=form, follow_redirects=False)
    assert unconfirmed.status_code == 303
    assert unconfirmed.headers["location"] == f"/log/{row}#retry-panel"
    assert (await log_row(resources, row)).pr_state is LegState.UNCONFIRMED
    assert await _jobs(resources) == 0

    entry = await owner.client.get(f"/log/{row}", headers=HTML)
    form = {**tokens(entry.text, f"/log/{row}/retry"), "from": "timeline", "confirm": "1"}
    confirmed = await owner.client.post(f"/log/{row}/retry", data=form, follow_redirects=False)
    assert confirmed.status_code == 303
    after = await log_row(resources, row)
    assert after.pr_state is LegState.PENDING
    assert after.pr_evidence
    assert after.pr_evidence["manual_retry"]["from_state"] == "UNCONFIRMED"


async def test_check_again_notes_the_request_and_queues_the_inbox_check(
    resources: Resources, owner: Creator
) -> None:
    row = await add_log(resources, owner, state=LegState.UNCONFIRMED)
    entry = await owner.client.get(f"/log/{row}", headers=HTML)
    form = tokens(entry.text, f"/log/{row}/check")
    answer = await owner.client.post(f"/log/{row}/check", data=form, follow_redirects=False)
    repeat = await owner.client.post(f"/log/{row}/check", data=form, follow_redirects=False)
    assert answer.headers["location"] == repeat.headers["location"] == f"/log/{row}?notice=checking"
    evidence = (await log_row(resources, row)).pr_evidence or {}
    assert evidence["check_requested"]["by"] == "sunny@example.com"
    assert await resources.queue.job(f"verify:{row}") is not None
    page = await owner.client.get(f"/log/{row}?notice=checking", headers=HTML)
    assert "Check requested" in page.text
    assert "waiting for the result" in page.text


async def test_retry_without_csrf_is_refused_and_changes_nothing(
    resources: Resources, owner: Creator
) -> None:
    row = await add_log(resources, owner, state=LegState.FAILED)
    entry = await owner.client.get(f"/log/{row}", headers=HTML)
    form = tokens(entry.text, f"/log/{row}/retry")
    form.pop("_csrf_token")
    refused = await owner.client.post(f"/log/{row}/retry", data=form, headers=HTML)
    assert refused.status_code == 403
    wrong = await owner.client.post(
        f"/log/{row}/retry", data=form, headers={**HTML, "x-csrftoken": "forged"}
    )
    assert wrong.status_code == 403
    assert (await log_row(resources, row)).pr_state is LegState.FAILED
    async with resources.sessionmaker() as session:
        retries = select(func.count()).where(IdempotencyKey.scope == "delivery.retry")
        assert await session.scalar(retries) == 0
    assert await _jobs(resources) == 0


async def test_members_see_the_log_but_cannot_retry(
    settings: Settings, resources: Resources, owner: Creator
) -> None:
    row = await add_log(resources, owner, state=LegState.FAILED)
    await add_member(resources, owner.workspace_id, "helper@example.com")
    async with signed_in_as(settings, "helper@example.com") as helper:
        page = await helper.get("/log", headers=HTML)
        assert page.status_code == 200
        assert _row_ids(page.text) == [row]
        assert 'disabled title="Your role lets you see deliveries' in page.text
        assert 'id="bulk-retry"' not in page.text
        entry = await helper.get(f"/log/{row}", headers=HTML)
        refused = await helper.post(
            f"/log/{row}/retry",
            data={"_csrf_token": csrf_token(entry.text), "_idem": "m" * 32},
            headers=HTML,
        )
        assert refused.status_code == 403
    assert (await log_row(resources, row)).pr_state is LegState.FAILED


async def test_bulk_retry_retries_the_failed_ones_once(
    resources: Resources, owner: Creator
) -> None:
    failed = [await add_log(resources, owner, state=LegState.FAILED) for _ in range(3)]
    unconfirmed = await add_log(resources, owner, state=LegState.UNCONFIRMED)
    sent = await add_log(resources, owner, state=LegState.SENT)
    page = await owner.client.get("/log?state=FAILED", headers=HTML)
    assert all(f'name="ids" value="{row}" form="bulk-retry"' in page.text for row in failed)
    form = {
        **tokens(page.text, "/log/retry"),
        "back": "/log?state=FAILED",
        "ids": [str(r) for r in [*failed, unconfirmed, sent]],
    }
    first = await owner.client.post("/log/retry", data=form, follow_redirects=False)
    again = await owner.client.post("/log/retry", data=form, follow_redirects=False)
    expected = "/log?state=FAILED&retried=3&refused=2"
    assert first.headers["location"] == again.headers["location"] == expected
    states = [(await log_row(resources, r)).pr_state for r in [*failed, unconfirmed, sent]]
    assert states == [LegState.PENDING] * 3 + [LegState.UNCONFIRMED, LegState.SENT]
    assert await _jobs(resources) == 3
    shown = await owner.client.get(expected, headers=HTML)
    assert "3 deliveries queued for retry." in shown.text
    assert "2 selected row(s)" in shown.text


async def test_pager_links_push_the_url_of_the_page_shown(
    resources: Resources, owner: Creator
) -> None:
    start = datetime.now(UTC) - timedelta(hours=1)
    await add_logs(
        resources, [log_values(owner, created_at=start + timedelta(seconds=n)) for n in range(120)]
    )

    def link(html: str, element_id: str) -> str:
        found = re.search(rf'<a href="([^"]+)" id="{element_id}"', html)
        assert found, element_id
        return found.group(1).replace("&amp;", "&")

    first = await owner.client.get("/log", headers=HTML)
    assert 'id="newer-page"' not in first.text
    second = await owner.client.get(link(first.text, "older-page"), headers=HTMX)
    assert second.headers["hx-push-url"].startswith("/log?before=")
    third = await owner.client.get(link(second.text, "older-page"), headers=HTMX)
    assert len(_row_ids(third.text)) == 20
    assert 'id="older-page"' not in third.text
    back_to_second = await owner.client.get(link(third.text, "newer-page"), headers=HTMX)
    assert back_to_second.headers["hx-push-url"].startswith("/log?after=")
    assert _row_ids(back_to_second.text) == _row_ids(second.text)
    back_to_first = await owner.client.get(link(second.text, "newer-page"), headers=HTMX)
    assert back_to_first.headers["hx-push-url"] == "/log"
    assert _row_ids(back_to_first.text) == _row_ids(first.text)
    assert "Live: new deliveries appear here" in back_to_first.text
    assert "An older page" in second.text


async def test_retry_selected_with_nothing_ticked_goes_back_to_the_log_and_says_why(
    resources: Resources, owner: Creator
) -> None:
    await add_log(resources, owner, state=LegState.FAILED)
    page = await owner.client.get("/log?state=FAILED", headers=HTML)
    form = {**tokens(page.text, "/log/retry"), "back": "/log?state=FAILED"}
    answer = await owner.client.post("/log/retry", data=form, headers=HTML, follow_redirects=False)
    assert answer.status_code == 303
    assert answer.headers["location"] == "/log?state=FAILED&retried=none"
    shown = await owner.client.get(answer.headers["location"], headers=HTML)
    assert shown.status_code == 200
    assert "Nothing was retried. Tick the box at the start of each row" in shown.text
    assert 'id="log-rows"' in shown.text
    assert await _jobs(resources) == 0


async def test_states_and_refusals_are_in_plain_words_and_a_retry_clears_the_old_refusal(
    resources: Resources, owner: Creator
) -> None:
    row = await add_log(
        resources,
        owner,
        state=LegState.FAILED,
        pr_error_code=551,
        pr_error_message="the person is unavailable or cannot receive messages",
    )
    await add_log(resources, owner, state=LegState.SKIPPED_DEDUP, username="marco")
    await add_log(
        resources,
        owner,
        state=LegState.SENT,
        username="olga",
        trigger_kind=TriggerKind.POSTBACK,
        message_kind=MessageKind.FOLLOW_PROMPT,
    )
    page = await owner.client.get("/log", headers=HTML)
    # A tap's row names what went out: the follow request, not the link.
    assert 'data-message-kind="follow_prompt">the request to follow<' in page.text
    assert 'data-state="FAILED" title="FAILED">Not sent<' in page.text
    assert "Instagram refused: this person can&#39;t receive messages" in page.text
    assert ">Already sent to this person<" in page.text
    assert "code 551" not in page.text
    assert "SKIPPED_DEDUP<" not in page.text  # the code stays an attribute, never the words
    entry = await owner.client.get(f"/log/{row}", headers=HTML)
    assert "Meta's code 551" in entry.text  # the code is kept for support, in the details
    assert 'id="dm-attempts">1 of 3<' in entry.text

    form = {**tokens(entry.text, f"/log/{row}/retry"), "from": "timeline"}
    retried = await owner.client.post(f"/log/{row}/retry", data=form, follow_redirects=False)
    assert retried.status_code == 303
    page = await owner.client.get("/log", headers=HTML)
    assert 'data-state="PENDING" title="PENDING">Waiting to send<' in page.text
    assert "can&#39;t receive messages" not in page.text  # not the old refusal under PENDING
    async with resources.sessionmaker() as session, session.begin():
        await session.execute(
            text("UPDATE dm_logs SET pr_attempts = pr_attempts + 1 WHERE id = :id"), {"id": row}
        )
    entry = await owner.client.get(f"/log/{row}", headers=HTML)
    assert 'id="dm-attempts">1 of 3 since your retry' in entry.text
