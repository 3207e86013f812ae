"""Members see, admins change: every state-changing route refuses a member.

The routes come from the app's own route table, so a route added later is covered without
anyone remembering to add it here; the few that any member may use are listed with why.
Each request is one a browser could send (the CSRF token of a page, a fresh one-time key),
and the answer must be the role check's own refusal, not a CSRF or missing-key one.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from litestar.routes import ASGIRoute, HTTPRoute
from sqlalchemy import text

from app.asgi import create_app
from app.db.models import LegState, Role
from app.delivery_log.report_links import create_report_link
from app.resources import Resources
from app.settings import Settings, load_settings
from app.web.idempotency import new_idempotency_key
from app.workspaces.invites import InviteCreated, create_invite
from tests.support.dashboard import csrf_token
from tests.support.infra import base_env
from tests.support.log_data import Creator, add_log, add_member, signed_in_as, signed_in_creator

MUTATING = {"POST", "PUT", "PATCH", "DELETE"}
MEMBER = "helper@example.com"
ROLE_REFUSAL = "lets you see everything but not change it"

# Routes any member may use, each for a reason:
ANY_MEMBER = {
    # Used before there is a session (so before there is a role).
    "/login",
    "/signup",
    "/invite/{token:str}/signin",
    "/invite/{token:str}/signup",
    # About the member themselves: their session, their membership, their invite.
    "/logout",
    "/team/leave",
    "/workspaces/switch",
    "/invite/{token:str}/accept",
    # Read-only helpers of the editor and "Try a comment": they compute an answer from the
    # posted text and write nothing.
    "/campaigns/preview",
    "/campaigns/keywords",
    "/campaigns/try",
    # Meta's deauthorize and data-deletion callbacks: no session at all; they authenticate by
    # the signed_request's HMAC (tests/integration/test_meta_callbacks.py).
    "/meta/deauthorize",
    "/meta/data-deletion",
}
# Raw ASGI routes have no method table to read: Meta's webhook, which authenticates by
# signature, not by a session, and the tracked-link redirect a fan opens, which changes
# nothing a role guards (it only records the tap).
ASGI_ROUTES = {"/webhooks/instagram", "/go"}


def _route_table() -> tuple[list[str], set[str]]:
    # Building the app opens no connection, so the table can be read at collection time.
    app = create_app(load_settings(base_env("postgresql://x@127.0.0.1/x", "redis://127.0.0.1")))
    mutating = sorted(
        {
            route.path
            for route in app.routes
            if isinstance(route, HTTPRoute)
            for handler in route.route_handlers
            if MUTATING & set(handler.http_methods)
        }
    )
    asgi = {route.path for route in app.routes if isinstance(route, ASGIRoute)}
    return mutating, asgi


ROUTES, ASGI_FOUND = _route_table()
GUARDED = [path for path in ROUTES if path not in ANY_MEMBER]


@dataclass
class Team:
    owner: Creator
    member: Any  # the member's signed-in client
    params: dict[str, str]


@pytest.fixture
async def team(settings: Settings, resources: Resources) -> AsyncIterator[Team]:
    async with signed_in_creator(settings, resources) as owner:
        log_id = await add_log(resources, owner, state=LegState.FAILED)
        async with resources.sessionmaker() as session, session.begin():
            invite = await create_invite(
                session,
                workspace_id=owner.workspace_id,
                inviter_id=owner.user_id,
                email="friend@example.com",
                role=Role.ADMIN,
            )
        assert isinstance(invite, InviteCreated)
        async with resources.sessionmaker() as session, session.begin():
            report = await create_report_link(
                session,
                workspace_id=owner.workspace_id,
                campaign_id=owner.campaign_id,
                user_id=owner.user_id,
            )
        assert report is not None
        await add_member(resources, owner.workspace_id, MEMBER)
        async with signed_in_as(settings, MEMBER) as member:
            yield Team(
                owner=owner,
                member=member,
                params={
                    "account_id": str(owner.account_id),
                    "campaign_id": str(owner.campaign_id),
                    "dm_log_id": str(log_id),
                    "invite_id": str(invite.invite_id),
                    "link_id": str(report.link_id),
                    "user_id": str(owner.user_id),  # a member trying to change the owner
                    "token": invite.token,
                },
            )


def _path(template: str, params: dict[str, str]) -> str:
    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in params:
            pytest.fail(f"{template}: add a value for the path parameter {name!r} to `team`")
        return params[name]

    return re.sub(r"\{(\w+)(?::\w+)?\}", value, template)


def _form(page_html: str, params: dict[str, str]) -> dict[str, str]:
    """What the route's own form would send: the page's CSRF token, a fresh key, and fields
    a valid change of each kind carries."""
    return {
        "_csrf_token": csrf_token(page_html),
        "_idem": new_idempotency_key(),
        "ids": params["dm_log_id"],
        "role": "admin",
        "email": "someone@example.com",
        "name": "Renamed",
        "account_id": params["account_id"],
        "confirm": "1",
    }


async def _snapshot(resources: Resources) -> dict[str, str]:
    """A digest of every table of ours, and the queue's size."""
    async with resources.engine.connect() as conn:
        tables = (
            await conn.execute(
                text(
                    "SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
                    "AND tablename <> 'alembic_version' ORDER BY tablename"
                )
            )
        ).scalars()
        digest = {}
        for table in list(tables):
            rows = f"SELECT string_agg(t::text, '|' ORDER BY t::text) FROM \"{table}\" t"  # noqa: S608 - names from pg_tables
            digest[table] = (await conn.execute(text(rows))).scalar_one() or ""
    digest["queue"] = str(await resources.queue.count("incomplete"))
    return digest


def test_the_route_table_is_read_and_the_allowlist_is_current() -> None:
    # The enumeration must find the routes it guards, and every allowlisted route must still
    # exist (a stale entry would exempt a future route that reuses its path).
    assert len(GUARDED) >= 15, GUARDED
    assert "/log/{dm_log_id:int}/retry" in GUARDED
    assert ANY_MEMBER - set(ROUTES) == set()
    assert ASGI_FOUND == ASGI_ROUTES


@pytest.mark.parametrize("route", GUARDED)
async def test_a_member_cannot_use_a_changing_route(
    route: str, team: Team, resources: Resources
) -> None:
    path = _path(route, team.params)
    page = await team.member.get("/")
    before = await _snapshot(resources)
    refused = await team.member.post(
        path,
        data=_form(page.text, team.params),
        headers={"accept": "text/html"},
        follow_redirects=False,
    )
    assert refused.status_code == 403, (path, refused.status_code, refused.text[:300])
    assert ROLE_REFUSAL in refused.text  # the role check said no, not CSRF or a missing key
    assert await _snapshot(resources) == before
