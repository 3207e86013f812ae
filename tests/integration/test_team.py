"""The team: invites, accepting them, roles, removing, leaving, switching workspaces, the CLI.

The app runs in-process against the run's PostgreSQL and Redis, through CSRF, the Redis
sessions and the one-time keys, as in production; each person is a client with its own
cookie jar. The races (two owners demoting each other, two accepts of one invite) run as two
real concurrent tasks on two database connections.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

import httpx
import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy import func, select, text, update

from app.asgi import create_app
from app.auth.sessions import SESSION_COOKIE
from app.auth.users import create_user
from app.db.models import Role, User, WorkspaceInvite, WorkspaceMember
from app.resources import Resources
from app.settings import Settings
from app.workspaces.invites import (
    Accepted,
    InviteCreated,
    InviteState,
    InviteView,
    accept_invite,
    create_invite,
)
from app.workspaces.members import change_role, leave_workspace, remove_member
from app.workspaces.roles import Problem, Refusal
from app.workspaces.service import create_user_with_workspace
from tests.support.dashboard import (
    PASSWORD,
    add_account,
    csrf_token,
    error_for,
    form_for,
    identity_of,
    sign_up,
    tokens,
)
from tests.support.processes import run_cli

Client = AsyncTestClient  # type: ignore[type-arg]
OWNER = "sunny@example.com"
HELPER = "helper@example.com"
HTML = {"accept": "text/html"}

NewClient = Callable[[], Awaitable[Client]]


@pytest.fixture
async def new_client(settings: Settings, test_env: dict[str, str]) -> AsyncIterator[NewClient]:
    """Open as many browsers (clients with their own cookies) as a test needs."""
    async with AsyncExitStack() as stack:

        async def open_one() -> Client:
            return await stack.enter_async_context(AsyncTestClient(create_app(settings)))

        yield open_one


@pytest.fixture
async def owner(new_client: NewClient) -> Client:
    client = await new_client()
    await sign_up(client, OWNER, workspace="Sunny Bakes")
    return client


# --- helpers ------------------------------------------------------------------------------


async def _post_form(client: Client, page_path: str, action: str, **fields: str) -> httpx.Response:
    """Open `page_path` and send its form posting to `action` with `fields`."""
    page = await client.get(page_path)
    assert page.status_code == 200, page.text
    response: httpx.Response = await client.post(
        action,
        data={**tokens(page.text, action), **fields},
        headers=HTML,
        follow_redirects=False,
    )
    return response


def _link_in(html: str) -> str:
    match = re.search(r'id="invite-link" value="([^"]+)"', html)
    assert match, "no invite link in the page"
    return match.group(1)


def _path_of(link: str) -> str:
    return urlsplit(link).path


async def _invite(client: Client, email: str, role: str = "member") -> str:
    """Invite through the Team page; returns the link shown (once)."""
    response = await _post_form(client, "/team", "/team/invites", email=email, role=role)
    assert response.status_code == 200, response.text
    return _link_in(response.text)


async def _join_as_new(client: Client, link: str, password: str = PASSWORD) -> httpx.Response:
    """Open an invite link as a visitor and create the account it offers."""
    path = _path_of(link)
    return await _post_form(client, path, f"{path}/signup", password=password, password2=password)


async def _login(client: Client, email: str, next_path: str = "/") -> httpx.Response:
    page = await client.get("/login", params={"next": next_path})
    response: httpx.Response = await client.post(
        "/login",
        data={
            **tokens(page.text, "/login"),
            "email": email,
            "password": PASSWORD,
            "next": next_path,
        },
        follow_redirects=False,
    )
    assert response.status_code == 303, response.text
    return response


async def _member_role(resources: Resources, workspace_id: int, email: str) -> Role | None:
    async with resources.sessionmaker() as session:
        role: Role | None = await session.scalar(
            select(WorkspaceMember.role)
            .join(User, User.id == WorkspaceMember.user_id)
            .where(WorkspaceMember.workspace_id == workspace_id, User.email == email)
        )
    return role


async def _member_count(resources: Resources, workspace_id: int) -> int:
    async with resources.sessionmaker() as session:
        count = await session.scalar(
            select(func.count()).where(WorkspaceMember.workspace_id == workspace_id)
        )
    return int(count or 0)


async def _owner_count(resources: Resources, workspace_id: int) -> int:
    async with resources.sessionmaker() as session:
        count = await session.scalar(
            select(func.count()).where(
                WorkspaceMember.workspace_id == workspace_id, WorkspaceMember.role == Role.OWNER
            )
        )
    return int(count or 0)


async def _team_with(
    owner: Client, new_client: NewClient, resources: Resources, **people: str
) -> dict[str, Client]:
    """Invite each `email=role` into the owner's workspace and have them join."""
    joined = {}
    for name, role in people.items():
        email = f"{name}@example.com"
        link = await _invite(owner, email, role)
        client = await new_client()
        assert (await _join_as_new(client, link)).status_code == 303
        joined[name] = client
    return joined


async def _create_campaign(client: Client, account_id: int) -> int:
    page = await client.get("/campaigns/new")
    response = await client.post(
        "/campaigns",
        data={
            **tokens(page.text, "/campaigns"),
            "name": "Lemon loaf",
            "account_id": str(account_id),
            "scope": "any_post",
            "match_mode": "whole_word",
            "keywords": ["RECIPE"],
            "dm_text": "Hi {username}! Here is the recipe: https://sunny.example/lemon",
        },
        follow_redirects=False,
    )
    assert response.status_code == 303, response.text
    return int(response.headers["location"].split("/")[2].split("?")[0])


# --- invite → accept → read-only member ---------------------------------------------------


async def test_an_invited_member_joins_and_sees_the_workspace_read_only(
    owner: Client, new_client: NewClient, resources: Resources, settings: Settings
) -> None:
    owner_id, workspace_id = await identity_of(resources, OWNER)
    account_id = await add_account(resources, workspace_id)
    campaign_id = await _create_campaign(owner, account_id)

    link = await _invite(owner, "Helper@Example.com")
    assert link.startswith(f"{settings.public_base_url}/invite/")
    team = await owner.get("/team")
    invites = team.text[team.text.index('id="invites"') :]
    assert "helper@example.com" in invites
    assert link not in team.text  # the link was shown once, on the answer to the form

    helper = await new_client()
    page = await helper.get(_path_of(link))
    assert page.status_code == 200
    assert "Sunny Bakes" in page.text
    assert OWNER in page.text  # who invited
    assert 'data-mode="signup"' in page.text
    assert page.headers["referrer-policy"] == "no-referrer"
    joined = await _join_as_new(helper, link)
    assert joined.status_code == 303
    assert joined.headers["location"] == "/"

    home = await helper.get("/")
    assert home.status_code == 200
    assert "Sunny Bakes" in home.text
    assert await _member_role(resources, workspace_id, HELPER) is Role.MEMBER
    async with resources.sessionmaker() as session:
        invite = (await session.execute(select(WorkspaceInvite))).scalar_one()
    helper_id, helper_ws = await identity_of(resources, HELPER)
    assert helper_ws == workspace_id  # no workspace of their own was made
    assert (invite.accepted_by, invite.invited_by) == (helper_id, owner_id)
    assert invite.accepted_at is not None

    # They see everything...
    campaigns = await helper.get("/campaigns")
    assert campaigns.status_code == 200
    assert "Lemon loaf" in campaigns.text
    editor = await helper.get(f"/campaigns/{campaign_id}")
    assert editor.status_code == 200
    assert 'id="save-campaign"' not in editor.text
    team = await helper.get("/team")
    assert team.status_code == 200
    assert OWNER in team.text
    assert HELPER in team.text
    assert "owners and admins invite people" in team.text  # the role note
    assert "/team/invites" in team.text  # the form is drawn, disabled
    assert re.search(r'<fieldset class="invite-fields"\s+disabled', team.text)
    assert 'action="/team/members/' not in team.text  # no working role or remove forms

    # ...and change nothing.
    any_page = (await helper.get("/")).text
    token = csrf_token(any_page)
    for path in (
        f"/campaigns/{campaign_id}/pause",
        f"/campaigns/{campaign_id}/archive",
        f"/accounts/{account_id}/disconnect",
        "/accounts/connect",
        "/team/invites",
        f"/team/members/{owner_id}/role",
        f"/team/members/{owner_id}/remove",
    ):
        refused = await helper.post(
            path,
            data={"_csrf_token": token, "_idem": "member-key-0123456789", "role": "member"},
            headers=HTML,
        )
        assert refused.status_code == 403, path
    assert "lets you see everything but not change it" in refused.text
    assert await _member_role(resources, workspace_id, OWNER) is Role.OWNER


async def test_the_token_is_stored_only_as_its_hash_and_shown_once(
    owner: Client, resources: Resources, settings: Settings
) -> None:
    page = await owner.get("/team")
    form = {**tokens(page.text, "/team/invites"), "email": HELPER, "role": "admin"}
    first = await owner.post("/team/invites", data=form, headers=HTML)
    link = _link_in(first.text)
    token = link.rsplit("/", 1)[1]
    assert len(token) >= 43  # token_urlsafe(32)

    async with resources.engine.connect() as conn:
        invite = (await conn.execute(text("SELECT * FROM workspace_invites"))).one()
        keys = (await conn.execute(text("SELECT * FROM idempotency_keys"))).all()
    assert invite.token_hash == hashlib.sha256(token.encode()).hexdigest()
    assert token not in repr(tuple(invite))
    assert keys
    assert token not in repr([tuple(row) for row in keys])
    assert invite.expires_at - invite.created_at == timedelta(days=7)
    assert invite.role == "admin"
    # The new invite and the list say its expiry the same way.
    expires = re.search(r'id="new-invite-expires"><time[^>]*>([^<]+)</time>', first.text)
    assert expires is not None
    assert expires.group(1) == "in 6 d"
    assert f">{expires.group(1)}</time>" in first.text.split('id="new-invite-expires"')[1]

    # The same form again (a reload, a double click): the first answer, without the link.
    again = await owner.post("/team/invites", data=form, headers=HTML, follow_redirects=True)
    assert again.status_code == 200
    assert token not in again.text
    assert "Its link was shown once" in again.text
    async with resources.sessionmaker() as session:
        assert await session.scalar(select(func.count()).select_from(WorkspaceInvite)) == 1


async def test_inviting_with_htmx_swaps_the_link_into_the_page(owner: Client) -> None:
    page = await owner.get("/team")
    response = await owner.post(
        "/team/invites",
        data={**tokens(page.text, "/team/invites"), "email": HELPER, "role": "member"},
        headers={"hx-request": "true", "x-csrftoken": csrf_token(page.text)},
    )
    assert response.status_code == 200
    assert "<html" not in response.text  # the page's body only
    assert 'id="copy-invite-link"' in response.text
    assert 'data-copy="#invite-link"' in response.text
    bad = await owner.post(
        "/team/invites",
        data={**tokens(page.text, "/team/invites"), "email": "not-an-email", "role": "member"},
        headers={"hx-request": "true", "x-csrftoken": csrf_token(page.text)},
    )
    assert bad.status_code == 422
    assert error_for(bad.text, "email") == "Enter a valid email address."


# --- invites that cannot be made ----------------------------------------------------------


async def test_inviting_a_member_or_an_open_invitee_shows_the_field_error(
    owner: Client, new_client: NewClient, resources: Resources
) -> None:
    await _team_with(owner, new_client, resources, helper="member")
    refused = await _post_form(owner, "/team", "/team/invites", email=HELPER.upper(), role="admin")
    assert refused.status_code == 422
    assert "already a member" in (error_for(refused.text, "email") or "")
    self_invite = await _post_form(owner, "/team", "/team/invites", email=OWNER, role="member")
    assert "already a member" in (error_for(self_invite.text, "email") or "")

    await _invite(owner, "new@example.com")
    twice = await _post_form(
        owner, "/team", "/team/invites", email="new@example.com", role="member"
    )
    assert twice.status_code == 422
    assert "already has an open invite" in (error_for(twice.text, "email") or "")
    as_owner = await _post_form(
        owner, "/team", "/team/invites", email="x@example.com", role="owner"
    )
    assert as_owner.status_code == 422
    assert error_for(as_owner.text, "role") == "Choose admin or member."
    async with resources.sessionmaker() as session:
        emails = (await session.scalars(select(WorkspaceInvite.email))).all()
    assert sorted(emails) == ["helper@example.com", "new@example.com"]


async def test_an_expired_invite_does_not_block_a_new_one(
    owner: Client, resources: Resources
) -> None:
    await _invite(owner, HELPER)
    async with resources.sessionmaker() as session, session.begin():
        await session.execute(
            update(WorkspaceInvite).values(expires_at=datetime.now(UTC) - timedelta(minutes=1))
        )
    team = await owner.get("/team")
    assert "expired" in team.text
    fresh = await _invite(owner, HELPER)
    assert fresh
    async with resources.sessionmaker() as session:
        rows = (await session.execute(select(WorkspaceInvite).order_by(WorkspaceInvite.id))).all()
    first, second = (row[0] for row in rows)
    assert first.revoked_at is not None  # closed to make room
    assert (second.revoked_at, second.accepted_at) == (None, None)


# --- closed links -------------------------------------------------------------------------


async def test_unknown_expired_revoked_and_used_links_are_refused(
    owner: Client, new_client: NewClient, resources: Resources
) -> None:
    visitor = await new_client()
    unknown = await visitor.get("/invite/" + "x" * 43)
    assert unknown.status_code == 404
    assert "not valid" in unknown.text

    # Revoked through the page: the link stops working at once.
    revoked_link = await _invite(owner, "revoked@example.com")
    team = await owner.get("/team")
    invite_id = re.search(r'data-invite-id="(\d+)"', team.text)
    assert invite_id
    revoke = f"/team/invites/{invite_id.group(1)}/revoke"
    done = await _post_form(owner, "/team", revoke)
    assert done.status_code == 303
    assert done.headers["location"] == "/team?notice=revoked"
    page = await visitor.get(_path_of(revoked_link))
    assert page.status_code == 410
    assert "revoked" in page.text
    path = _path_of(revoked_link)
    signup = await visitor.post(
        f"{path}/signup",
        data={
            "_csrf_token": csrf_token((await visitor.get("/login")).text),
            "_idem": "revoked-signup-key-0123",
            "password": PASSWORD,
            "password2": PASSWORD,
        },
        headers=HTML,
    )
    assert signup.status_code == 410
    assert "revoked" in signup.text

    # Expired.
    expired_link = await _invite(owner, "late@example.com")
    async with resources.sessionmaker() as session, session.begin():
        await session.execute(
            update(WorkspaceInvite)
            .where(WorkspaceInvite.email == "late@example.com")
            .values(expires_at=func.now() - timedelta(seconds=1))
        )
    page = await visitor.get(_path_of(expired_link))
    assert page.status_code == 410
    assert "expired" in page.text

    # Used.
    used_link = await _invite(owner, HELPER)
    assert (await _join_as_new(await new_client(), used_link)).status_code == 303
    page = await visitor.get(_path_of(used_link))
    assert page.status_code == 410
    assert "already been used" in page.text

    async with resources.sessionmaker() as session:
        users = (await session.execute(text("SELECT email FROM users ORDER BY id"))).all()
    assert [row[0] for row in users] == [OWNER, HELPER]


async def test_the_sign_up_form_follows_the_password_rules(
    owner: Client, new_client: NewClient, resources: Resources
) -> None:
    link = await _invite(owner, HELPER)
    visitor = await new_client()
    path = _path_of(link)
    short = await _post_form(visitor, path, f"{path}/signup", password="short", password2="short")
    assert short.status_code == 422
    assert "at least 10 characters" in (error_for(short.text, "password") or "")
    differ = await _post_form(
        visitor, path, f"{path}/signup", password=PASSWORD, password2=PASSWORD + "!"
    )
    assert differ.status_code == 422
    assert error_for(differ.text, "password2") == "The two passwords are not the same."
    async with resources.sessionmaker() as session:
        assert await session.scalar(text("SELECT count(*) FROM users")) == 1
        hashes = (await session.execute(text("SELECT password_hash FROM users"))).scalars()
        assert all(h.startswith("$argon2id$") for h in hashes)


async def test_a_double_submitted_sign_up_joins_once_and_both_answers_sign_in(
    owner: Client, new_client: NewClient, resources: Resources
) -> None:
    link = await _invite(owner, HELPER)
    path = _path_of(link)
    visitor = await new_client()
    page = await visitor.get(path)
    form = {**tokens(page.text, f"{path}/signup"), "password": PASSWORD, "password2": PASSWORD}
    first = await visitor.post(f"{path}/signup", data=form, follow_redirects=False)
    assert first.status_code == 303
    visitor.cookies.delete(SESSION_COOKIE)  # as if the browser had dropped the first answer
    second = await visitor.post(f"{path}/signup", data=form, follow_redirects=False)
    assert second.status_code == 303
    assert second.headers["location"] == "/"
    home = await visitor.get("/", headers=HTML, follow_redirects=False)
    assert home.status_code == 200
    assert "Sunny Bakes" in home.text
    _, workspace_id = await identity_of(resources, OWNER)
    assert await _member_count(resources, workspace_id) == 2


async def test_an_invite_sign_up_for_an_email_taken_meanwhile_goes_to_the_links_sign_in(
    owner: Client, new_client: NewClient, resources: Resources
) -> None:
    link = await _invite(owner, HELPER)
    path = _path_of(link)
    visitor = await new_client()
    page = await visitor.get(path)
    assert 'data-mode="signup"' in page.text
    # The account is made in another tab before this form is sent.
    await sign_up(await new_client(), HELPER, workspace="Helper's own")
    async with resources.sessionmaker() as session:
        stored_hash = await session.scalar(select(User.password_hash).where(User.email == HELPER))
    form = {
        **tokens(page.text, f"{path}/signup"),
        "password": "another password entirely",
        "password2": "another password entirely",
    }
    taken = await visitor.post(f"{path}/signup", data=form, follow_redirects=False)
    assert taken.status_code == 303
    assert taken.headers["location"] == path
    assert visitor.cookies.get(SESSION_COOKIE) is None
    async with resources.sessionmaker() as session:
        assert (
            await session.scalar(select(User.password_hash).where(User.email == HELPER))
        ) == stored_hash
    # The link's page offers the sign-in, and accepting that way still works.
    page = await visitor.get(path)
    assert 'data-mode="signin"' in page.text
    await _login(visitor, HELPER, next_path=path)
    accepted = await _post_form(visitor, path, f"{path}/accept")
    assert accepted.status_code == 303
    _, sunny_ws = await identity_of(resources, OWNER)
    assert await _member_count(resources, sunny_ws) == 2


# --- accepting as an existing user --------------------------------------------------------


async def test_an_existing_user_signs_in_to_accept_and_lands_in_the_workspace(
    owner: Client, new_client: NewClient, resources: Resources
) -> None:
    helper = await new_client()
    await sign_up(helper, HELPER, workspace="Helper's own")
    _, own_ws = await identity_of(resources, HELPER)
    _, sunny_ws = await identity_of(resources, OWNER)
    link = await _invite(owner, HELPER, role="admin")
    path = _path_of(link)

    visitor = await new_client()
    page = await visitor.get(path)
    assert 'data-mode="signin"' in page.text
    assert f'href="/login?next={path}"' in page.text
    signed_in = await _login(visitor, HELPER, next_path=path)
    assert signed_in.headers["location"] == path  # back to the invite
    page = await visitor.get(path)
    assert 'data-mode="accept"' in page.text
    before = visitor.cookies.get(SESSION_COOKIE)
    accepted = await _post_form(visitor, path, f"{path}/accept")
    assert accepted.status_code == 303
    assert accepted.headers["location"] == "/"
    after = visitor.cookies.get(SESSION_COOKIE)
    assert after
    assert after != before  # rotated, as at sign-in
    home = await visitor.get("/")
    assert "admin of Sunny Bakes" in home.text
    assert await _member_role(resources, sunny_ws, HELPER) is Role.ADMIN
    assert await _member_role(resources, own_ws, HELPER) is Role.OWNER

    # Someone signed in as another email is told so and offered a sign-out that comes back.
    other_link = await _invite(owner, "third@example.com")
    other_path = _path_of(other_link)
    wrong = await visitor.get(other_path)
    assert 'data-mode="wrong_user"' in wrong.text
    assert "third@example.com" in wrong.text
    assert HELPER in wrong.text
    refused = await visitor.post(
        f"{other_path}/accept",
        data={"_csrf_token": csrf_token(wrong.text), "_idem": "wrong-user-accept-0123456789"},
        headers=HTML,
    )
    assert refused.status_code == 403
    assert "This invite is for someone else" in refused.text
    out = await visitor.post(
        "/logout",
        data={**tokens(wrong.text, "/logout"), "next": other_path},
        follow_redirects=False,
    )
    assert out.headers["location"] == other_path
    page = await visitor.get(other_path)
    assert 'data-mode="signup"' in page.text


async def test_two_accepts_at_once_join_once_and_the_other_is_told_it_was_used(
    owner: Client, new_client: NewClient, resources: Resources
) -> None:
    first, second = await new_client(), await new_client()
    await sign_up(first, HELPER, workspace="Helper's own")
    await _login(second, HELPER)
    link = await _invite(owner, HELPER)
    path = _path_of(link)
    pages = [await c.get(path) for c in (first, second)]
    answers = await asyncio.gather(
        *(
            c.post(
                f"{path}/accept",
                data=tokens(p.text, f"{path}/accept"),
                headers=HTML,
                follow_redirects=False,
            )
            for c, p in zip((first, second), pages, strict=True)
        )
    )
    codes = sorted(a.status_code for a in answers)
    assert codes == [303, 410], [a.text for a in answers]
    used = next(a for a in answers if a.status_code == 410)
    assert "already been used" in used.text
    _, sunny_ws = await identity_of(resources, OWNER)
    assert await _member_count(resources, sunny_ws) == 2


async def test_an_invite_is_used_once_even_by_two_concurrent_transactions(
    resources: Resources, test_env: dict[str, str]
) -> None:
    async with resources.sessionmaker() as session, session.begin():
        owner = await create_user_with_workspace(session, email=OWNER, password=PASSWORD)
        helper_id = await create_user(session, email=HELPER, password=PASSWORD)
        made = await create_invite(
            session,
            workspace_id=owner.workspace_id,
            inviter_id=owner.user_id,
            email=HELPER,
            role=Role.MEMBER,
        )
    assert isinstance(made, InviteCreated)
    start = asyncio.Event()

    async def accept() -> Accepted | InviteView | None:
        async with resources.sessionmaker() as session, session.begin():
            await session.execute(text("SELECT 1"))  # both transactions are open
            await start.wait()
            result = await accept_invite(session, token=made.token, user_id=helper_id, email=HELPER)
            # Hold the transaction open: the other accept runs while this one is uncommitted.
            await asyncio.sleep(0.3)
            return result

    tasks = [asyncio.create_task(accept()) for _ in range(2)]
    await asyncio.sleep(0.1)
    start.set()
    results = await asyncio.gather(*tasks)
    accepted = [r for r in results if isinstance(r, Accepted)]
    refused = [r for r in results if isinstance(r, InviteView)]
    assert len(accepted) == 1
    assert len(refused) == 1
    assert refused[0].state is InviteState.USED
    assert await _member_count(resources, owner.workspace_id) == 2


# --- roles --------------------------------------------------------------------------------


async def test_role_rules_for_admins_members_and_owners(
    owner: Client, new_client: NewClient, resources: Resources
) -> None:
    people = await _team_with(owner, new_client, resources, admin="admin", helper="member")
    admin, helper = people["admin"], people["helper"]
    owner_id, ws = await identity_of(resources, OWNER)
    admin_id, _ = await identity_of(resources, "admin@example.com")
    helper_id, _ = await identity_of(resources, HELPER)

    sent = iter(range(1000))

    async def act(client: Client, path: str, **fields: str) -> httpx.Response:
        return await client.post(
            path,
            data={
                "_csrf_token": csrf_token((await client.get("/team")).text),
                "_idem": f"role-rules-key-{next(sent)}-0123456789",
                **fields,
            },
            headers=HTML,
            follow_redirects=False,
        )

    # An admin can neither remove an owner, nor change an owner's role, nor make an owner.
    assert (await act(admin, f"/team/members/{owner_id}/remove")).status_code == 403
    demote = await act(admin, f"/team/members/{owner_id}/role", role="member")
    assert demote.status_code == 403
    assert "Only an owner" in demote.text
    crown = await act(admin, f"/team/members/{helper_id}/role", role="owner")
    assert crown.status_code == 403
    assert "Only an owner can make someone an owner" in crown.text
    # The admin's page draws no working controls on the owner's row.
    page = (await admin.get("/team")).text
    assert f'action="/team/members/{owner_id}/role"' not in page
    assert f'action="/team/members/{helper_id}/role"' in page
    assert '<option value="owner"' not in page

    # A member can invite nobody and change nothing.
    invite = await act(helper, "/team/invites", email="x@example.com", role="member")
    assert invite.status_code == 403
    assert (await act(helper, f"/team/members/{admin_id}/remove")).status_code == 403

    # An admin manages members: promote, demote, remove.
    promoted = await act(admin, f"/team/members/{helper_id}/role", role="admin")
    assert promoted.status_code == 303
    assert promoted.headers["location"] == "/team?notice=role"
    assert await _member_role(resources, ws, HELPER) is Role.ADMIN
    # ...but not another admin.
    back = await act(admin, f"/team/members/{helper_id}/role", role="member")
    assert back.status_code == 403
    assert await _member_role(resources, ws, HELPER) is Role.ADMIN

    # The owner changes anyone, and may make an owner.
    assert (await act(owner, f"/team/members/{helper_id}/role", role="member")).status_code == 303
    removed = await act(admin, f"/team/members/{helper_id}/remove")
    assert removed.status_code == 303
    assert await _member_role(resources, ws, HELPER) is None
    crowned = await act(owner, f"/team/members/{admin_id}/role", role="owner")
    assert crowned.status_code == 303
    assert await _member_role(resources, ws, "admin@example.com") is Role.OWNER
    # The removed member's session no longer opens the workspace.
    gone = await helper.get("/campaigns", headers=HTML, follow_redirects=False)
    assert gone.status_code == 303
    assert gone.headers["location"].startswith("/login")


async def test_the_last_owner_can_be_neither_demoted_nor_removed_nor_leave(
    owner: Client, new_client: NewClient, resources: Resources
) -> None:
    people = await _team_with(owner, new_client, resources, admin="admin")
    owner_id, ws = await identity_of(resources, OWNER)
    admin_id, _ = await identity_of(resources, "admin@example.com")

    page = (await owner.get("/team")).text
    assert 'action="/team/leave"' not in page
    assert "You are the only owner" in page
    token = csrf_token(page)
    demote = await owner.post(
        f"/team/members/{owner_id}/role",
        data={"_csrf_token": token, "_idem": "demote-self-0123456789", "role": "admin"},
        headers=HTML,
    )
    assert demote.status_code == 409
    assert "needs an owner" in demote.text
    leave = await owner.post(
        "/team/leave", data={"_csrf_token": token, "_idem": "leave-self-0123456789"}, headers=HTML
    )
    assert leave.status_code == 409
    assert "only owner" in leave.text
    assert await _owner_count(resources, ws) == 1

    # With a second owner, the first may step down (and the second is then the last).
    crown = await _post_form(owner, "/team", f"/team/members/{admin_id}/role", role="owner")
    assert crown.status_code == 303
    step_down = await _post_form(owner, "/team", f"/team/members/{owner_id}/role", role="member")
    assert step_down.status_code == 303
    assert await _member_role(resources, ws, OWNER) is Role.MEMBER
    new_owner = people["admin"]
    token = csrf_token((await new_owner.get("/team")).text)
    refused = await new_owner.post(
        f"/team/members/{admin_id}/role",
        data={"_csrf_token": token, "_idem": "demote-last-0123456789", "role": "member"},
        headers=HTML,
    )
    assert refused.status_code == 409
    assert await _owner_count(resources, ws) == 1


@pytest.mark.parametrize(
    ("change", "loser_told"),
    [
        # Each demotes the other: the second to run is no longer an owner itself.
        ("demote_each_other", Problem.FORBIDDEN),
        ("demote_themselves", Problem.LAST_OWNER),
        ("leave", Problem.LAST_OWNER),
        ("remove_each_other", Problem.FORBIDDEN),
    ],
)
async def test_two_owners_changing_at_once_always_leave_an_owner(
    resources: Resources, test_env: dict[str, str], change: str, loser_told: Problem
) -> None:
    async with resources.sessionmaker() as session, session.begin():
        first = await create_user_with_workspace(session, email=OWNER, password=PASSWORD)
        second_id = await create_user(session, email=HELPER, password=PASSWORD)
        session.add(
            WorkspaceMember(workspace_id=first.workspace_id, user_id=second_id, role=Role.OWNER)
        )
    ws = first.workspace_id
    start = asyncio.Event()

    async def run(actor: int, other: int) -> Refusal | None:
        async with resources.sessionmaker() as session, session.begin():
            await session.execute(text("SELECT 1"))  # both transactions are open
            await start.wait()
            if change == "demote_each_other":
                refusal = await change_role(
                    session, workspace_id=ws, actor_id=actor, target_id=other, role=Role.MEMBER
                )
            elif change == "demote_themselves":
                refusal = await change_role(
                    session, workspace_id=ws, actor_id=actor, target_id=actor, role=Role.ADMIN
                )
            elif change == "leave":
                refusal = await leave_workspace(session, workspace_id=ws, user_id=actor)
            else:
                refusal = await remove_member(
                    session, workspace_id=ws, actor_id=actor, target_id=other
                )
            # Hold the transaction open: the other change runs while this one is uncommitted.
            await asyncio.sleep(0.3)
            return refusal

    tasks = [
        asyncio.create_task(run(first.user_id, second_id)),
        asyncio.create_task(run(second_id, first.user_id)),
    ]
    await asyncio.sleep(0.1)
    start.set()
    results = await asyncio.gather(*tasks)
    assert results.count(None) == 1, results
    [refusal] = [r for r in results if r is not None]
    assert refusal.problem is loser_told
    assert await _owner_count(resources, ws) == 1


# --- leaving and switching ----------------------------------------------------------------


async def test_switching_workspace_and_leaving_one(
    owner: Client, new_client: NewClient, resources: Resources
) -> None:
    helper = await new_client()
    await sign_up(helper, HELPER, workspace="Helper's own")
    _, own_ws = await identity_of(resources, HELPER)
    _, sunny_ws = await identity_of(resources, OWNER)
    link = await _invite(owner, HELPER)
    await _post_form(helper, _path_of(link), f"{_path_of(link)}/accept")

    home = await helper.get("/")
    assert "member of Sunny Bakes" in home.text
    switcher = form_for(home.text, "/workspaces/switch")
    assert "_idem" in switcher.fields
    assert f'<option value="{own_ws}"' in home.text
    moved = await helper.post(
        "/workspaces/switch",
        data={**tokens(home.text, "/workspaces/switch"), "workspace_id": str(own_ws)},
        follow_redirects=False,
    )
    assert moved.status_code == 303
    assert moved.headers["location"] == "/"
    assert "owner of Helper&#39;s own" in (await helper.get("/")).text

    # A workspace they do not belong to (or that does not exist) is not found.
    _, rival_ws = await identity_of(resources, OWNER)
    stranger = await new_client()
    await sign_up(stranger, "stranger@example.com")
    page = await stranger.get("/accounts")
    for target in (str(rival_ws), "999999", "nope"):
        refused = await stranger.post(
            "/workspaces/switch",
            data={
                "_csrf_token": csrf_token(page.text),
                "_idem": f"switch-{target}-0123456789",
                "workspace_id": target,
            },
            headers=HTML,
        )
        assert refused.status_code == 404, target
    assert "Sunny Bakes" not in (await stranger.get("/")).text

    # Leaving the invited workspace moves the session to the one left.
    await helper.post(
        "/workspaces/switch",
        data={
            **tokens((await helper.get("/")).text, "/workspaces/switch"),
            "workspace_id": str(sunny_ws),
        },
    )
    left = await _post_form(helper, "/team", "/team/leave")
    assert left.status_code == 303
    assert left.headers["location"] == "/team?notice=left"
    team = await helper.get(left.headers["location"])
    assert "You left that workspace. You are now in Helper&#39;s own." in team.text
    assert await _member_role(resources, sunny_ws, HELPER) is None
    assert 'action="/workspaces/switch"' not in team.text  # one workspace left: no switcher


async def test_leaving_the_only_workspace_signs_out_with_a_message(
    owner: Client, new_client: NewClient, resources: Resources
) -> None:
    people = await _team_with(owner, new_client, resources, helper="member")
    helper = people["helper"]
    left = await _post_form(helper, "/team", "/team/leave")
    assert left.status_code == 303
    assert left.headers["location"] == "/team/left"
    page = await helper.get("/team/left")
    assert page.status_code == 200
    assert "no longer belongs to any workspace" in page.text
    assert helper.cookies.get(SESSION_COOKIE) in (None, "null")
    again = await helper.get("/", headers=HTML, follow_redirects=False)
    assert again.status_code == 303
    assert again.headers["location"].startswith("/login")
    login = await helper.get("/login")
    refused = await helper.post(
        "/login",
        data={**tokens(login.text, "/login"), "email": HELPER, "password": PASSWORD},
    )
    assert "no longer belongs to any workspace" in refused.text

    # Invited again, they sign in on the invite page itself (sign-in has nowhere to open).
    link = await _invite(owner, HELPER)
    path = _path_of(link)
    page = await helper.get(path)
    assert 'data-mode="signin_here"' in page.text
    form = tokens(page.text, f"{path}/signin")
    wrong = await helper.post(
        f"{path}/signin", data={**form, "password": "wrong password"}, follow_redirects=False
    )
    assert wrong.status_code == 400
    assert "do not match" in (error_for(wrong.text, "password") or "")
    joined = await helper.post(
        f"{path}/signin", data={**form, "password": PASSWORD}, follow_redirects=False
    )
    assert joined.status_code == 303
    assert joined.headers["location"] == "/"
    assert "member of Sunny Bakes" in (await helper.get("/")).text


# --- isolation and CSRF -------------------------------------------------------------------


async def test_another_workspace_cannot_see_or_touch_these_invites_or_members(
    owner: Client, new_client: NewClient, resources: Resources
) -> None:
    await _team_with(owner, new_client, resources, helper="member")
    await _invite(owner, "pending@example.com")
    helper_id, _ = await identity_of(resources, HELPER)
    async with resources.sessionmaker() as session:
        invite_id = await session.scalar(
            select(WorkspaceInvite.id).where(WorkspaceInvite.email == "pending@example.com")
        )
    rival = await new_client()
    await sign_up(rival, "rival@example.com", workspace="Rival")
    page = await rival.get("/team")
    assert "pending@example.com" not in page.text
    assert HELPER not in page.text
    token = csrf_token(page.text)
    for path, fields in (
        (f"/team/invites/{invite_id}/revoke", {}),
        (f"/team/members/{helper_id}/role", {"role": "admin"}),
        (f"/team/members/{helper_id}/remove", {}),
    ):
        response = await rival.post(
            path,
            data={"_csrf_token": token, "_idem": f"rival{path.replace('/', '-')}-0123", **fields},
            headers=HTML,
        )
        assert response.status_code == 404, path
    _, sunny_ws = await identity_of(resources, OWNER)
    assert await _member_role(resources, sunny_ws, HELPER) is Role.MEMBER
    async with resources.sessionmaker() as session:
        invite = await session.get(WorkspaceInvite, invite_id)
        assert invite is not None
        assert invite.revoked_at is None


async def test_team_forms_without_the_csrf_token_are_refused(
    owner: Client, new_client: NewClient, resources: Resources
) -> None:
    people = await _team_with(owner, new_client, resources, helper="member")
    helper_id, sunny_ws = await identity_of(resources, HELPER)
    link = await _invite(owner, "pending@example.com")
    path = _path_of(link)
    for client, action, fields in (
        (owner, "/team/invites", {"email": "x@example.com", "role": "member"}),
        (owner, f"/team/members/{helper_id}/role", {"role": "admin"}),
        (owner, f"/team/members/{helper_id}/remove", {}),
        (owner, "/team/invites/1/revoke", {}),
        (owner, "/workspaces/switch", {"workspace_id": str(sunny_ws)}),
        (people["helper"], "/team/leave", {}),
        (people["helper"], f"{path}/accept", {}),
        (await new_client(), f"{path}/signup", {"password": PASSWORD, "password2": PASSWORD}),
    ):
        for forged in (None, "forged" * 20):
            data = {"_idem": "csrf-check-key-0123456789", **fields}
            if forged:
                data["_csrf_token"] = forged
            response = await client.post(action, data=data)
            assert response.status_code == 403, (action, forged)
    assert await _member_role(resources, sunny_ws, HELPER) is Role.MEMBER
    async with resources.sessionmaker() as session:
        invites = (await session.scalars(select(WorkspaceInvite.email))).all()
        assert sorted(invites) == ["helper@example.com", "pending@example.com"]
        open_one = await session.scalar(
            select(WorkspaceInvite.accepted_at).where(
                WorkspaceInvite.email == "pending@example.com"
            )
        )
        assert open_one is None


# --- the CLI ------------------------------------------------------------------------------


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(env, "invite", *args)


async def test_cli_invite_prints_a_link_that_works(
    test_env: dict[str, str], resources: Resources, settings: Settings, new_client: NewClient
) -> None:
    async with resources.sessionmaker() as session, session.begin():
        made = await create_user_with_workspace(
            session, email=OWNER, password=PASSWORD, workspace_name="Sunny Bakes"
        )
    result = _cli(
        test_env, "--email", OWNER.upper(), "--invitee", "Helper@Example.com", "--role", "admin"
    )
    assert result.returncode == 0, result.stderr
    link = result.stdout.strip()
    assert re.fullmatch(rf"{re.escape(settings.public_base_url)}/invite/[A-Za-z0-9_-]{{43}}", link)
    assert "helper@example.com as admin of 'Sunny Bakes'" in result.stderr
    token = link.rsplit("/", 1)[1]
    async with resources.sessionmaker() as session:
        invite = (await session.execute(select(WorkspaceInvite))).scalar_one()
    assert invite.token_hash == hashlib.sha256(token.encode()).hexdigest()
    assert (invite.workspace_id, invite.invited_by) == (made.workspace_id, made.user_id)

    visitor = await new_client()
    assert (await _join_as_new(visitor, link)).status_code == 303
    assert await _member_role(resources, made.workspace_id, HELPER) is Role.ADMIN


async def test_cli_invite_refuses_bad_input_with_one_line(
    test_env: dict[str, str], resources: Resources
) -> None:
    async with resources.sessionmaker() as session, session.begin():
        made = await create_user_with_workspace(
            session, email=OWNER, password=PASSWORD, workspace_name="Sunny Bakes"
        )
        helper_id = await create_user(session, email=HELPER, password=PASSWORD)
        session.add(
            WorkspaceMember(workspace_id=made.workspace_id, user_id=helper_id, role=Role.MEMBER)
        )
    cases: list[tuple[tuple[str, ...], int, str]] = [
        (("--email", OWNER, "--invitee", "not-an-email"), 2, "Enter a valid email address."),
        (("--email", "nobody@example.com", "--invitee", "x@example.com"), 1, "no user with"),
        (("--email", OWNER, "--invitee", "x@example.com", "--role", "owner"), 2, "--role must"),
        (("--email", OWNER, "--invitee", HELPER), 1, "already a member"),
        (("--email", HELPER, "--invitee", "x@example.com"), 1, "not an owner or admin"),
        (
            ("--email", OWNER, "--invitee", "x@example.com", "--workspace", "Other"),
            1,
            "not an owner or admin of a workspace named 'Other'",
        ),
    ]
    # Each refusal is its own process and changes nothing: they run side by side, each
    # waiting for its answer in a thread (the Python start-up is most of their time).
    results = await asyncio.gather(
        *(asyncio.to_thread(_cli, test_env, *args) for args, _, _ in cases)
    )
    for (args, code, message), result in zip(cases, results, strict=True):
        assert result.returncode == code, (args, result.stderr)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, (args, result.stderr)
        assert lines[0].startswith("oncereply: ")
        assert message in lines[0], (args, lines[0])
        assert "Traceback" not in result.stderr
        assert result.stdout == ""
    async with resources.sessionmaker() as session:
        assert await session.scalar(select(func.count()).select_from(WorkspaceInvite)) == 0


async def test_invite_rules_apply_to_direct_calls_too(
    resources: Resources, test_env: dict[str, str]
) -> None:
    """The service refuses what the page never offers: a member inviting, an owner invite."""
    async with resources.sessionmaker() as session, session.begin():
        made = await create_user_with_workspace(session, email=OWNER, password=PASSWORD)
        helper_id = await create_user(session, email=HELPER, password=PASSWORD)
        session.add(
            WorkspaceMember(workspace_id=made.workspace_id, user_id=helper_id, role=Role.MEMBER)
        )
    async with resources.sessionmaker() as session, session.begin():
        by_member = await create_invite(
            session,
            workspace_id=made.workspace_id,
            inviter_id=helper_id,
            email="x@example.com",
            role=Role.MEMBER,
        )
        as_owner = await create_invite(
            session,
            workspace_id=made.workspace_id,
            inviter_id=made.user_id,
            email="x@example.com",
            role=Role.OWNER,
        )
    assert isinstance(by_member, Refusal)
    assert by_member.problem is Problem.FORBIDDEN
    assert isinstance(as_owner, Refusal)
    assert as_owner.problem is Problem.INVALID
    async with resources.sessionmaker() as session:
        assert await session.scalar(select(func.count()).select_from(WorkspaceInvite)) == 0
