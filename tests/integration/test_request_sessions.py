"""Every request gives its database connection back, also when it is refused.

A refusal raised while guards and dependencies run (not signed in, a member on an admin's
route) happens after the request's session has been opened; the connection it checked out
must be back in the pool when the answer is sent, not whenever the garbage collector
happens to reach it (by then the pool may be gone, and the connection leaks).
"""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy import delete, select

from app.db.models import User, WorkspaceMember
from app.resources import Resources
from app.settings import Settings
from tests.support.log_data import add_member, signed_in_as, signed_in_creator

HTML = {"accept": "text/html"}


@pytest.fixture
def no_gc() -> Iterator[None]:
    # Without the collector a connection held by an unclosed session stays checked out,
    # so the assertions see the leak instead of a lucky collection.
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _checked_out(client: AsyncTestClient) -> int:  # type: ignore[type-arg]
    resources: Resources = client.app.state.resources
    return int(resources.engine.pool.checkedout())  # type: ignore[attr-defined]


@asynccontextmanager
async def _signed_in_member(
    settings: Settings, resources: Resources
) -> AsyncIterator[AsyncTestClient]:  # type: ignore[type-arg]
    async with signed_in_creator(settings, resources) as owner:
        await add_member(resources, owner.workspace_id, "helper@example.com")
    async with signed_in_as(settings, "helper@example.com") as client:
        yield client


@pytest.mark.usefixtures("no_gc")
async def test_a_members_refusal_returns_the_connection(
    settings: Settings, resources: Resources
) -> None:
    async with _signed_in_member(settings, resources) as helper:
        page = await helper.get("/campaigns/new", headers=HTML)
        assert page.status_code == 403
        assert _checked_out(helper) == 0
        # The session is usable afterwards: the next request reads the database as usual.
        assert (await helper.get("/log", headers=HTML)).status_code == 200
        assert _checked_out(helper) == 0


@pytest.mark.usefixtures("no_gc")
async def test_a_sign_in_redirect_after_removal_returns_the_connection(
    settings: Settings, resources: Resources
) -> None:
    async with _signed_in_member(settings, resources) as helper:
        async with resources.sessionmaker() as session, session.begin():
            await session.execute(
                delete(WorkspaceMember).where(
                    WorkspaceMember.user_id
                    == select(User.id).where(User.email == "helper@example.com").scalar_subquery()
                )
            )
        # The session still names the user; reading the membership finds none.
        page = await helper.get("/log", headers=HTML, follow_redirects=False)
        assert page.status_code == 303
        assert page.headers["location"] == "/login?next=/log"
        assert _checked_out(helper) == 0
