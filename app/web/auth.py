"""Sign-up, sign-in and sign-out pages.

Sign-in runs under the login throttle and starts a session under a fresh id; sign-out deletes
the session server-side, so a copied cookie or the back button does not bring it back.

Sign-up carries a one-time key like every other state-changing form (`app.web.signup`): a
double submit creates one account, and the repeat is signed in too (with the same password
check and throttle as the sign-in form), landing where the first went. The key is
fingerprinted with the email and the workspace name, never the password.
"""

from __future__ import annotations

from typing import Any

from litestar import Controller, Response, post
from litestar.di import NamedDependency
from litestar.params import FromQuery
from litestar.plugins.htmx import HTMXRequest
from litestar.response import Redirect, Template
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.current import load_viewer, safe_next, session_identity
from app.auth.sessions import end_session
from app.auth.signin import (
    NO_WORKSPACE,
    SignedIn,
    SignInRefused,
    check_sign_in,
    first_workspace,
    start_session,
)
from app.auth.throttle import LoginThrottle
from app.auth.users import InvalidUserError, UserExistsError, normalize_email, validate_credentials
from app.operations.idempotency import Refused, fingerprint_of
from app.resources import Resources
from app.web.htmx import redirect
from app.web.reads import get_or_head
from app.web.signup import SignUp, client_address, sign_up_and_in
from app.workspaces.service import create_user_with_workspace
from app.workspaces.time_zone import browser_zone_or_default

_NO_STORE = {"Cache-Control": "no-store"}
# Sign-up never says whether an email has an account: for a taken email the password is
# hashed all the same (in `create_user`), the throttle counts it, and the answer is a 303 to
# the sign-in page with a notice that reads the same whoever the email belongs to.
EXISTING = "/login?existing=1"


async def _signed_in(request: HTMXRequest, db_session: NamedDependency[AsyncSession]) -> bool:
    identity = session_identity(request)
    if identity and await load_viewer(db_session, *identity):
        return True
    if identity:
        end_session(request)  # a session for a removed user or workspace: drop it
    return False


class AuthController(Controller):
    @get_or_head("/login", name="login")
    async def login_page(
        self,
        request: HTMXRequest,
        db_session: NamedDependency[AsyncSession],
        next: FromQuery[str | None] = None,
    ) -> Template | Redirect:
        if await _signed_in(request, db_session):
            return Redirect(safe_next(next), status_code=303)
        return Template(
            "auth/login.html",
            context={
                "next": safe_next(next),
                "email": "",
                "error": None,
                "signed_out": "signed_out" in request.query_params,
                "existing": "existing" in request.query_params,
            },
            headers=_NO_STORE,
        )

    @post("/login", name="login_submit", status_code=200)
    async def login(
        self,
        request: HTMXRequest,
        db_session: NamedDependency[AsyncSession],
        resources: NamedDependency[Resources],
    ) -> Template | Redirect:
        form = await request.form()
        email = str(form.get("email") or "").strip()
        password = str(form.get("password") or "")
        target = safe_next(str(form.get("next") or ""))
        result = await check_sign_in(
            db_session,
            LoginThrottle(resources.redis),
            email=email,
            password=password,
            address=client_address(request),
        )
        if not isinstance(result, SignedIn):
            return Template(
                "auth/login.html",
                context={"next": target, "email": email, "error": result.message},
                status_code=result.status_code,
                headers=_NO_STORE,
            )
        await db_session.commit()
        start_session(request, result.user_id, result.workspace_id)
        return Redirect(target, status_code=303)

    @get_or_head("/signup", name="signup")
    async def signup_page(
        self, request: HTMXRequest, db_session: NamedDependency[AsyncSession]
    ) -> Template | Redirect:
        if await _signed_in(request, db_session):
            return Redirect("/", status_code=303)
        return Template(
            "auth/signup.html",
            context={"values": {}, "errors": {}},
            headers=_NO_STORE,
        )

    @post("/signup", name="signup_submit", status_code=200)
    async def signup(
        self,
        request: HTMXRequest,
        db_session: NamedDependency[AsyncSession],
        resources: NamedDependency[Resources],
    ) -> Response[Any]:
        form = await request.form()
        values = {
            "email": str(form.get("email") or "").strip(),
            "workspace": " ".join(str(form.get("workspace") or "").split())[:100],
        }
        password = str(form.get("password") or "")
        try:
            validate_credentials(values["email"], password)
        except InvalidUserError as exc:
            field = "password" if "password" in str(exc) else "email"
            return _signup_page(values, {field: str(exc)})

        async def create(session: AsyncSession) -> SignedIn | Refused[Response[Any]]:
            try:
                new_user = await create_user_with_workspace(
                    session,
                    email=values["email"],
                    password=password,
                    workspace_name=values["workspace"] or None,
                    # The browser's zone (app.js fills the hidden field); UTC without JS.
                    time_zone=browser_zone_or_default(str(form.get("time_zone") or "")),
                )
            except UserExistsError:
                return Refused(redirect(request, EXISTING))
            return SignedIn(user_id=new_user.user_id, workspace_id=new_user.workspace_id)

        async def land_in(session: AsyncSession, user_id: int) -> int | Response[Any]:
            workspace_id = await first_workspace(session, user_id)
            if workspace_id is None:
                return _signup_page(values, {"email": NO_WORKSPACE}, 403)
            return workspace_id

        async def password_refused(refused: SignInRefused) -> Response[Any]:
            if refused.status_code == 400:
                return redirect(request, EXISTING)
            return _signup_page(values, {"email": refused.message}, refused.status_code)

        return await sign_up_and_in(
            request,
            resources,
            db_session,
            form,
            SignUp(
                scope="auth.signup",
                fingerprint=fingerprint_of(
                    "auth.signup", normalize_email(values["email"]), values["workspace"]
                ),
                email=values["email"],
                password=password,
                landing="/accounts?welcome=1",
            ),
            create=create,
            land_in=land_in,
            password_refused=password_refused,
        )

    @post("/logout", name="logout", status_code=200)
    async def logout(self, request: HTMXRequest) -> Redirect:
        # An invite link opened while signed in as someone else signs out and comes back.
        target = safe_next(str((await request.form()).get("next") or ""))
        end_session(request)
        return Redirect(target if target != "/" else "/login?signed_out=1", status_code=303)


def _signup_page(values: dict[str, str], errors: dict[str, str], status: int = 422) -> Template:
    return Template(
        "auth/signup.html",
        context={"values": values, "errors": errors},
        status_code=status,
        headers=_NO_STORE,
    )
