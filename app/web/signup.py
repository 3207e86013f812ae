"""Making an account from a form and signing the browser in, once per one-time key.

The sign-up page (`app.web.auth`) and an invite link's sign-up (`app.web.invite_link`) both go
through `sign_up_and_in`: the account is made in the one-time key's transaction (`create`,
which may refuse with a page), and the browser is signed in under a fresh session id. A
repeat of the key (a double submit) made nothing: it must prove the same password, under the
sign-in throttle, before it is signed in too, and lands where the first went. The key's
fingerprint is the caller's and never includes the password.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from litestar import Response
from litestar.datastructures import FormMultiDict
from litestar.plugins.htmx import HTMXRequest
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.signin import SignedIn, SignInRefused, check_password, start_session
from app.auth.throttle import LoginThrottle, SignupThrottle
from app.auth.users import normalize_email
from app.operations.idempotency import Finished, KeyRequest, Ran, Refused, Replay, run_once
from app.resources import Resources
from app.web.idempotency import (
    as_response,
    missing_key_response,
    one_time_key,
    redirect_to,
    unfinished_response,
)

Create = Callable[[AsyncSession], Awaitable[SignedIn | Refused[Response[Any]]]]
"""Makes the user (and joins them to a workspace) in the key's transaction."""
LandIn = Callable[[AsyncSession, int], Awaitable[int | Response[Any]]]
"""The workspace a repeat signs this user into, or the page that says why it cannot."""
PasswordRefused = Callable[[SignInRefused], Awaitable[Response[Any]]]
"""The page for a repeat whose password (or the throttle) said no, and for a sign-up the
sign-up throttle refused (429)."""


@dataclass(frozen=True, slots=True)
class SignUp:
    scope: str
    fingerprint: str
    email: str
    password: str
    # Where the new account goes (the stored answer every repeat gets as well).
    landing: str


def client_address(request: HTMXRequest) -> str:
    """The address the sign-in throttle counts attempts from."""
    return request.client.host if request.client else "unknown"


async def sign_up_and_in(
    request: HTMXRequest,
    resources: Resources,
    db_session: AsyncSession,
    form: FormMultiDict,
    signup: SignUp,
    *,
    create: Create,
    land_in: LandIn,
    password_refused: PasswordRefused,
) -> Response[Any]:
    """Run `create` once for the form's key and sign the browser in; see the module."""
    key = one_time_key(form, request)
    if key is None:
        return missing_key_response(request)
    throttle = await SignupThrottle(resources.redis).attempt(
        normalize_email(signup.email), client_address(request)
    )
    if not throttle.allowed:
        return await password_refused(
            SignInRefused(
                f"Too many sign-ups from here. Please try again in {throttle.retry_after_text}.",
                429,
            )
        )
    made: list[SignedIn] = []

    async def action(session: AsyncSession) -> Finished | Refused[Response[Any]]:
        result = await create(session)
        if isinstance(result, Refused):
            return result
        made.append(result)
        return redirect_to(signup.landing)

    outcome = await run_once(
        resources.sessionmaker,
        KeyRequest(scope=signup.scope, key=key, fingerprint=signup.fingerprint),
        action,
    )
    if isinstance(outcome, Ran):
        start_session(request, made[0].user_id, made[0].workspace_id)
        return as_response(request, outcome.response)
    if isinstance(outcome, Replay):
        user_id = await check_password(
            db_session,
            LoginThrottle(resources.redis),
            email=signup.email,
            password=signup.password,
            address=client_address(request),
        )
        if isinstance(user_id, SignInRefused):
            return await password_refused(user_id)
        landed = await land_in(db_session, user_id)
        if not isinstance(landed, int):
            return landed
        await db_session.commit()  # last_login_at
        start_session(request, user_id, landed)
        return as_response(request, outcome.response)
    return unfinished_response(request, outcome)
