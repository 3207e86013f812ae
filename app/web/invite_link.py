"""Invite links: `/invite/{token}` shows who invites whom to which workspace, and accepts.

- unknown token → 404; expired, revoked or already used → 410, each with its own sentence;
- not signed in → "create your account" (email fixed to the invite's) or, when an account
  with that email exists, "sign in to accept" (sign-in comes back here; an account that has
  left every workspace, which the sign-in page refuses, types its password here instead);
- signed in as the invited email → an Accept button; as someone else → say so, offer sign-out.

Accepting is one conditional UPDATE of the invite (still open, unexpired, for this email)
plus the membership insert (`app.workspaces.invites.accept_invite`), so two tabs or a double
click accept once. Then the session id is rotated, as at sign-in, onto the invited workspace.
The token is in the URL: these pages send `Referrer-Policy: no-referrer`, the log scrubs
`/invite/…` paths (`app.logs`), and the one-time key of the sign-up form (made and signed in
by `app.web.signup`, like the sign-up page) is fingerprinted with the token's hash and the
email, never the password.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from litestar import Controller, Response, post
from litestar.di import NamedDependency
from litestar.params import FromPath
from litestar.plugins.htmx import ClientRedirect, HTMXRequest
from litestar.response import Redirect, Template
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.current import Viewer, optional_viewer
from app.auth.signin import SignedIn, SignInRefused, check_password, start_session
from app.auth.throttle import LoginThrottle
from app.auth.users import (
    InvalidUserError,
    UserExistsError,
    create_user,
    find_user_by_email,
    validate_credentials,
)
from app.operations.idempotency import (
    Finished,
    KeyRequest,
    Ran,
    Refused,
    Replay,
    fingerprint_of,
    run_once,
)
from app.resources import Resources
from app.web.htmx import redirect
from app.web.idempotency import (
    as_response,
    idempotent,
    missing_key_response,
    one_time_key,
    redirect_to,
    unfinished_response,
)
from app.web.reads import get_or_head
from app.web.signup import LandIn, SignUp, client_address, sign_up_and_in
from app.workspaces.invites import (
    Accepted,
    InviteState,
    InviteView,
    accept_invite,
    find_invite,
    hash_token,
)
from app.workspaces.members import is_member, workspaces_of

_HEADERS = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"}
_CLOSED = {
    InviteState.EXPIRED: (
        "This invite has expired",
        "Invite links work for 7 days. Ask the person who invited you for a new one.",
    ),
    InviteState.REVOKED: (
        "This invite was revoked",
        "It no longer works. Ask the person who invited you for a new link if you still "
        "need access.",
    ),
    InviteState.USED: (
        "This invite has already been used",
        "Each invite link works once. If you accepted it, sign in to open the workspace.",
    ),
}


def _closed(invite: InviteView | None) -> Template:
    """The page for a link that cannot be used: unknown (404) or closed (410)."""
    if invite is None:
        status, reason = 404, "unknown"
        title, detail = (
            "This invite link is not valid",
            "Check that the whole link was copied, or ask for a new one.",
        )
    else:
        status, reason = 410, invite.state.value
        title, detail = _CLOSED.get(invite.state, _CLOSED[InviteState.USED])
    return Template(
        "team/invite_closed.html",
        context={"status": status, "reason": reason, "title": title, "detail": detail},
        status_code=status,
        headers=_HEADERS,
    )


def _not_usable(invite: InviteView | None, email: str) -> Template | None:
    """Why `email` cannot use this invite now, as a page; None when it can."""
    if invite is None or invite.state is not InviteState.OPEN:
        return _closed(invite)
    if invite.email != email.lower():
        return Template(
            "error.html",
            context={
                "status": 403,
                "title": "This invite is for someone else",
                "detail": f"It is for {invite.email}. Sign out and open the link again.",
            },
            status_code=403,
            headers=_HEADERS,
        )
    return None


def _invite_page(
    token: str,
    invite: InviteView,
    mode: str,
    *,
    viewer_email: str | None = None,
    errors: Mapping[str, str] | None = None,
    status_code: int = 200,
) -> Template:
    return Template(
        "team/invite.html",
        context={
            "token": token,
            "invite": invite,
            "mode": mode,
            "viewer_email": viewer_email,
            "errors": errors or {},
        },
        status_code=status_code,
        headers=_HEADERS,
    )


def _is_success(response: Response[Any]) -> bool:
    """The stored "go on" answer of an accept (a 303, or htmx's redirect)."""
    return isinstance(response, Redirect | ClientRedirect)


class InviteController(Controller):
    path = "/invite"

    @get_or_head("/{token:str}", name="invite")
    async def show(
        self,
        request: HTMXRequest,
        db_session: NamedDependency[AsyncSession],
        token: FromPath[str],
    ) -> Template:
        viewer = await optional_viewer(request, db_session)  # draws the header when signed in
        invite = await find_invite(db_session, token)
        if invite is None or invite.state is not InviteState.OPEN:
            return _closed(invite)
        if viewer is not None:
            mode = "accept" if viewer.email == invite.email else "wrong_user"
            return _invite_page(token, invite, mode, viewer_email=viewer.email)
        return _invite_page(token, invite, await _visitor_mode(db_session, invite.email))

    @post("/{token:str}/accept", name="invite_accept", status_code=200)
    async def accept(
        self,
        request: HTMXRequest,
        viewer: NamedDependency[Viewer],
        resources: NamedDependency[Resources],
        db_session: NamedDependency[AsyncSession],
        token: FromPath[str],
    ) -> Response[Any]:
        async def action(session: AsyncSession) -> Finished | Refused[Response[Any]]:
            result = await accept_invite(
                session, token=token, user_id=viewer.user_id, email=viewer.email
            )
            if isinstance(result, Accepted):
                return redirect_to("/")
            return Refused(_not_usable(result, viewer.email) or _closed(result))

        response = await idempotent(
            request, resources, viewer, scope="invite.accept", action=action
        )
        if _is_success(response):
            # The first accept and any repeat of it land in the invited workspace.
            invite = await find_invite(db_session, token)
            if (
                invite is not None
                and invite.accepted_by == viewer.user_id
                and await is_member(db_session, invite.workspace_id, viewer.user_id)
            ):
                start_session(request, viewer.user_id, invite.workspace_id)
        return response

    @post("/{token:str}/signup", name="invite_signup", status_code=200)
    async def signup(
        self,
        request: HTMXRequest,
        resources: NamedDependency[Resources],
        db_session: NamedDependency[AsyncSession],
        token: FromPath[str],
    ) -> Response[Any]:
        invite = await find_invite(db_session, token)
        if invite is None:
            return _closed(None)
        # A closed invite still goes through the one-time key below: a repeat of the click
        # that used it must get that click's answer, not "already used".
        form = await request.form()
        password = str(form.get("password") or "")
        errors: dict[str, str] = {}
        try:
            validate_credentials(invite.email, password)
        except InvalidUserError as exc:
            errors["password"] = str(exc)
        if not errors and str(form.get("password2") or "") != password:
            errors["password2"] = "The two passwords are not the same."
        if errors:
            if invite.state is not InviteState.OPEN:
                return _closed(invite)
            return _invite_page(token, invite, "signup", errors=errors, status_code=422)

        async def create(session: AsyncSession) -> SignedIn | Refused[Response[Any]]:
            try:
                user_id = await create_user(session, email=invite.email, password=password)
            except UserExistsError:
                # Made meanwhile (another tab): the password was hashed all the same and the
                # throttle counted it; like the sign-up page, go by the usual path, the link's
                # own page, which offers the sign-in.
                return Refused(redirect(request, f"/invite/{token}"))
            result = await accept_invite(session, token=token, user_id=user_id, email=invite.email)
            if not isinstance(result, Accepted):
                return Refused(_closed(result))
            return SignedIn(user_id=user_id, workspace_id=invite.workspace_id)

        async def password_refused(refused: SignInRefused) -> Response[Any]:
            if refused.status_code == 429 and invite.state is InviteState.OPEN:
                errors = {"password": refused.message}
                return _invite_page(token, invite, "signup", errors=errors, status_code=429)
            return _closed(await find_invite(db_session, token))

        return await sign_up_and_in(
            request,
            resources,
            db_session,
            form,
            SignUp(
                scope="invite.signup",
                fingerprint=_fingerprint("invite.signup", token, invite),
                email=invite.email,
                password=password,
                landing="/",
            ),
            create=create,
            land_in=_joined(invite),
            password_refused=password_refused,
        )

    @post("/{token:str}/signin", name="invite_signin", status_code=200)
    async def signin(
        self,
        request: HTMXRequest,
        resources: NamedDependency[Resources],
        db_session: NamedDependency[AsyncSession],
        token: FromPath[str],
    ) -> Response[Any]:
        """Sign in and accept in one step, for an account that has no workspace left (the
        sign-in page refuses those, having nowhere to open)."""
        invite = await find_invite(db_session, token)
        if invite is None:
            return _closed(None)
        form = await request.form()
        user_id = await check_password(
            db_session,
            LoginThrottle(resources.redis),
            email=invite.email,
            password=str(form.get("password") or ""),
            address=client_address(request),
        )
        if isinstance(user_id, SignInRefused):
            if invite.state is not InviteState.OPEN:
                return _closed(invite)
            return _invite_page(
                token,
                invite,
                "signin_here",
                errors={"password": user_id.message},
                status_code=user_id.status_code,
            )
        await db_session.commit()  # last_login_at
        key = one_time_key(form, request)
        if key is None:
            return missing_key_response(request)

        async def action(session: AsyncSession) -> Finished | Refused[Response[Any]]:
            result = await accept_invite(session, token=token, user_id=user_id, email=invite.email)
            if not isinstance(result, Accepted):
                return Refused(_closed(result))
            return redirect_to("/")

        outcome = await run_once(
            resources.sessionmaker,
            KeyRequest(
                scope="invite.signin",
                key=key,
                fingerprint=_fingerprint("invite.signin", token, invite),
            ),
            action,
        )
        if not isinstance(outcome, Ran | Replay):
            return unfinished_response(request, outcome)
        # Sign the browser in (a fresh session id) onto the invited workspace, if they joined
        # it, and give the stored answer (the overview).
        landed = await _joined(invite)(db_session, user_id)
        if not isinstance(landed, int):
            return landed
        start_session(request, user_id, landed)
        return as_response(request, outcome.response)


async def _visitor_mode(session: AsyncSession, email: str) -> str:
    """What the link offers someone not signed in: make the account, or sign in."""
    user = await find_user_by_email(session, email)
    if user is None:
        return "signup"
    # Sign-in opens a workspace; someone who has none left signs in right here instead.
    return "signin" if await workspaces_of(session, user.id) else "signin_here"


def _fingerprint(scope: str, token: str, invite: InviteView) -> str:
    # The token's hash and the email: never the password.
    return fingerprint_of(scope, hash_token(token), invite.email)


def _joined(invite: InviteView) -> LandIn:
    """The invited workspace, if the user is in it; else the spent link's page."""

    async def land_in(session: AsyncSession, user_id: int) -> int | Response[Any]:
        if await is_member(session, invite.workspace_id, user_id):
            return invite.workspace_id
        # Accepted, but no longer a member (removed in between): the link is spent all the same.
        return _closed(replace(invite, state=InviteState.USED))

    return land_in
