"""Idempotency keys on real PostgreSQL: one effect per key, the same answer for repeats,
"in progress" for a concurrent repeat, refusal for a key reused for something else.

Races are real: tasks on the session's event loop, each with its own database connection,
gathered at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.asgi import create_app
from app.auth.current import Viewer
from app.db.models import (
    Campaign,
    EventLevel,
    IdempotencyKey,
    IdempotencyStatus,
    OperationalEvent,
    Role,
)
from app.operations.events import record_event
from app.operations.idempotency import (
    Claimed,
    Finished,
    InProgress,
    KeyRequest,
    Mismatch,
    Ran,
    Refused,
    Replay,
    claim_key,
    run_once,
)
from app.resources import Resources
from app.settings import Settings
from app.web.idempotency import new_idempotency_key, request_fingerprint
from tests.support.dashboard import add_account, identity_of, sign_up, tokens

EMAIL = "sunny@example.com"


def _request(key: str = "k" * 32, fingerprint: str = "f" * 64) -> KeyRequest:
    return KeyRequest(scope="test.effect", key=key, fingerprint=fingerprint)


async def _events(resources: Resources) -> int:
    async with resources.sessionmaker() as session:
        return int(await session.scalar(select(func.count()).select_from(OperationalEvent)) or 0)


def _effect(delay_s: float = 0.0, response: dict[str, Any] | None = None) -> Any:
    """An action with a visible effect: one row in operational_events per run."""

    async def action(session: AsyncSession) -> Finished:
        await record_event(
            session, source="web", level=EventLevel.INFO, kind="test", message="did it"
        )
        if delay_s:
            await asyncio.sleep(delay_s)
        return Finished(response or {"status": 303, "location": "/done/1"})

    return action


async def test_a_repeat_gets_the_first_answer_and_changes_nothing(
    resources: Resources, test_env: dict[str, str]
) -> None:
    first = await run_once(resources.sessionmaker, _request(), _effect())
    second = await run_once(
        resources.sessionmaker, _request(), _effect(response={"status": 303, "location": "/2"})
    )
    assert first == Ran({"status": 303, "location": "/done/1"})
    assert second == Replay({"status": 303, "location": "/done/1"})
    assert await _events(resources) == 1


async def test_concurrent_claims_have_exactly_one_winner(
    resources: Resources, test_env: dict[str, str]
) -> None:
    async def claim() -> object:
        async with resources.sessionmaker() as session, session.begin():
            return await claim_key(session, _request())

    results = await asyncio.gather(*(claim() for _ in range(12)))
    assert sum(isinstance(r, Claimed) for r in results) == 1
    assert sum(isinstance(r, InProgress) for r in results) == 11


async def test_a_concurrent_repeat_is_told_in_progress_and_nothing_runs_twice(
    resources: Resources, test_env: dict[str, str]
) -> None:
    results = await asyncio.gather(
        *(
            run_once(resources.sessionmaker, _request(), _effect(delay_s=0.5), settle_s=0)
            for _ in range(8)
        )
    )
    assert sum(isinstance(r, Ran) for r in results) == 1
    assert sum(isinstance(r, InProgress) for r in results) == 7
    assert await _events(resources) == 1
    # Once the first has finished, a repeat gets its answer.
    later = await run_once(resources.sessionmaker, _request(), _effect())
    assert later == Replay({"status": 303, "location": "/done/1"})


async def test_a_double_click_waits_for_the_first_and_lands_in_the_same_place(
    resources: Resources, test_env: dict[str, str]
) -> None:
    results = await asyncio.gather(
        *(run_once(resources.sessionmaker, _request(), _effect(delay_s=0.3)) for _ in range(5))
    )
    assert sum(isinstance(r, Ran) for r in results) == 1
    assert sum(isinstance(r, Replay) for r in results) == 4
    assert {tuple(r.response.items()) for r in results if isinstance(r, Ran | Replay)} == {
        (("status", 303), ("location", "/done/1"))
    }
    assert await _events(resources) == 1


async def test_a_key_reused_for_a_different_request_is_refused(
    resources: Resources, test_env: dict[str, str]
) -> None:
    await run_once(resources.sessionmaker, _request(fingerprint="a" * 64), _effect())
    other = await run_once(resources.sessionmaker, _request(fingerprint="b" * 64), _effect())
    assert other == Mismatch()
    assert await _events(resources) == 1


async def test_refused_or_failed_work_frees_the_key_for_a_retry(
    resources: Resources, test_env: dict[str, str]
) -> None:
    async def refuse(session: AsyncSession) -> Refused[str]:
        await record_event(session, source="web", level=EventLevel.INFO, kind="x", message="x")
        return Refused("bad input")

    async def explode(session: AsyncSession) -> Finished:
        await record_event(session, source="web", level=EventLevel.INFO, kind="x", message="x")
        raise RuntimeError("boom")

    assert await run_once(resources.sessionmaker, _request(), refuse) == Refused("bad input")
    with pytest.raises(RuntimeError):
        await run_once(resources.sessionmaker, _request(), explode)
    async with resources.sessionmaker() as session:
        status = await session.scalar(select(IdempotencyKey.status))
    assert status is IdempotencyStatus.FAILED_RETRYABLE
    assert await _events(resources) == 0  # both rolled back

    assert isinstance(await run_once(resources.sessionmaker, _request(), _effect()), Ran)
    assert await _events(resources) == 1


async def test_an_expired_key_counts_as_unused(
    resources: Resources, test_env: dict[str, str]
) -> None:
    await run_once(resources.sessionmaker, _request(), _effect())
    async with resources.sessionmaker() as session, session.begin():
        await session.execute(
            update(IdempotencyKey).values(expires_at=func.now() - func.make_interval(0, 0, 0, 1))
        )
    again = await run_once(resources.sessionmaker, _request(fingerprint="c" * 64), _effect())
    assert isinstance(again, Ran)
    assert await _events(resources) == 2


# --- through the web: the campaign form ------------------------------------------------


@pytest.fixture
async def signed_in(
    settings: Settings, resources: Resources, test_env: dict[str, str]
) -> AsyncIterator[tuple[AsyncTestClient, int]]:  # type: ignore[type-arg]
    async with AsyncTestClient(create_app(settings)) as client:
        await sign_up(client, EMAIL)
        _, workspace_id = await identity_of(resources, EMAIL)
        account_id = await add_account(resources, workspace_id)
        yield client, account_id


def _campaign_form(account_id: int, page: str) -> dict[str, str]:
    return {
        **tokens(page, "/campaigns"),
        "name": "Lemon loaf",
        "account_id": str(account_id),
        "scope": "any_post",
        "match_mode": "whole_word",
        "keywords": "RECIPE",
        "dm_text": "Hi {username}!",
        "priority": "0",
    }


async def _campaigns(resources: Resources) -> int:
    async with resources.sessionmaker() as session:
        return int(await session.scalar(select(func.count()).select_from(Campaign)) or 0)


async def test_submitting_the_same_form_twice_creates_one_campaign(
    signed_in: tuple[AsyncTestClient, int],
    resources: Resources,  # type: ignore[type-arg]
) -> None:
    client, account_id = signed_in
    page = await client.get("/campaigns/new")
    form = _campaign_form(account_id, page.text)
    first = await client.post("/campaigns", data=form, follow_redirects=False)
    second = await client.post("/campaigns", data=form, follow_redirects=False)
    assert first.status_code == second.status_code == 303
    assert first.headers["location"] == second.headers["location"]
    assert await _campaigns(resources) == 1

    # With htmx the same answer is a client-side redirect to the same place.
    third = await client.post(
        "/campaigns", data=form, headers={"hx-request": "true"}, follow_redirects=False
    )
    assert third.status_code == 200
    assert third.headers["hx-redirect"] == first.headers["location"]
    assert await _campaigns(resources) == 1

    # A fresh page carries a fresh key: that is a second, deliberate campaign.
    page = await client.get("/campaigns/new")
    fourth = await client.post(
        "/campaigns", data=_campaign_form(account_id, page.text), follow_redirects=False
    )
    assert fourth.headers["location"] != first.headers["location"]
    assert await _campaigns(resources) == 2


async def test_a_form_still_being_processed_answers_in_progress(
    signed_in: tuple[AsyncTestClient, int],  # type: ignore[type-arg]
    resources: Resources,
) -> None:
    client, account_id = signed_in
    page = await client.get("/campaigns/new")
    form = _campaign_form(account_id, page.text)
    user_id, workspace_id = await identity_of(resources, EMAIL)
    viewer = Viewer(user_id, EMAIL, workspace_id, "ws", Role.OWNER)
    # The first submission of this form is mid-flight (its key claimed, not finished).
    async with resources.sessionmaker() as session, session.begin():
        claim = await claim_key(
            session,
            KeyRequest(
                scope="campaign.create",
                key=form["_idem"],
                fingerprint=request_fingerprint("POST", "/campaigns", viewer, form.items()),
                user_id=user_id,
                workspace_id=workspace_id,
            ),
        )
    assert isinstance(claim, Claimed)

    htmx = await client.post("/campaigns", data=form, headers={"hx-request": "true"})
    assert htmx.status_code == 409
    assert htmx.headers["hx-retarget"] == "#flash"
    assert "Already in progress" in htmx.text
    plain = await client.post("/campaigns", data=form, headers={"accept": "text/html"})
    assert plain.status_code == 409
    assert "Already in progress" in plain.text
    assert await _campaigns(resources) == 0


async def test_forms_without_a_key_or_with_a_used_one_change_nothing(
    signed_in: tuple[AsyncTestClient, int],  # type: ignore[type-arg]
    resources: Resources,
) -> None:
    client, account_id = signed_in
    page = await client.get("/campaigns/new")
    form = _campaign_form(account_id, page.text)
    missing = await client.post("/campaigns", data={k: v for k, v in form.items() if k != "_idem"})
    assert missing.status_code == 400
    assert "one-time token" in missing.text

    await client.post("/campaigns", data=form, follow_redirects=False)
    reused = await client.post("/campaigns", data={**form, "name": "Something else"})
    assert reused.status_code == 422
    assert "already used" in reused.text
    assert await _campaigns(resources) == 1
    assert len(new_idempotency_key()) >= 32
