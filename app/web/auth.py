"""Sign-up, sign-in and sign-out pages.

Sign-in runs under the login throttle and starts a session under a fresh id; sign-out deletes
the session server-side, so a copied cookie or the back button does not bring it back.
"""

from __future__ import annotations

from litestar import Controller, get, post
from litestar.di import NamedDependency
from litestar.params import FromQuery
from litestar.plugins.htmx import HTMXRequest
from litestar.response import Redirect, Template
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.current import load_viewer, safe_next, session_identity
from app.auth.sessions import end_session
from app.auth.signin import SignedIn, check_sign_in, start_session
from app.auth.throttle import LoginThrottle
from app.resources import Resources
from app.workspaces.service import InvalidUserError, UserExistsError, create_user_with_workspace

_NO_STORE = {"Cache-Control": "no-store"}


def _client_address(request: HTMXRequest) -> str:
    return request.client.host if request.client else "unknown"


async def _signed_in(request: HTMXRequest, db_session: NamedDependency[AsyncSession]) -> bool:
    identity = session_identity(request)
    if identity and await load_viewer(db_session, *identity):
        return True
    if identity:
        end_session(request)  # a session for a removed user or workspace: drop it
    return False


class AuthController(Controller):
    @get("/login", name="login")
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
            address=_client_address(request),
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

    @get("/signup", name="signup")
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
        self, request: HTMXRequest, db_session: NamedDependency[AsyncSession]
    ) -> Template | Redirect:
        form = await request.form()
        values = {
            "email": str(form.get("email") or "").strip(),
            "workspace": " ".join(str(form.get("workspace") or "").split())[:100],
        }
        password = str(form.get("password") or "")
        errors: dict[str, str] = {}
        try:
            created = await create_user_with_workspace(
                db_session,
                email=values["email"],
                password=password,
                workspace_name=values["workspace"] or None,
            )
        except InvalidUserError as exc:
            field = "password" if "password" in str(exc) else "email"
            errors[field] = str(exc)
        except UserExistsError:
            errors["email"] = "An account with this email already exists. Sign in instead."
        if errors:
            await db_session.rollback()
            return Template(
                "auth/signup.html",
                context={"values": values, "errors": errors},
                status_code=422,
                headers=_NO_STORE,
            )
        await db_session.commit()
        start_session(request, created.user_id, created.workspace_id)
        return Redirect("/accounts?welcome=1", status_code=303)

    @post("/logout", name="logout", status_code=200)
    async def logout(self, request: HTMXRequest) -> Redirect:
        # An invite link opened while signed in as someone else signs out and comes back.
        target = safe_next(str((await request.form()).get("next") or ""))
        end_session(request)
        return Redirect(target if target != "/" else "/login?signed_out=1", status_code=303)
