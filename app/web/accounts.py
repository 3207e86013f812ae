"""The Accounts page: connect Instagram (OAuth), see each account's health, disconnect.

Members see the cards; owners and admins connect, re-subscribe and disconnect. An account of
another workspace answers 404. The OAuth callback comes back here with a problem code in the
URL (`/accounts?connect=denied`), which the page turns into a clear sentence.
"""

from __future__ import annotations

from typing import Any

from litestar import Controller, Response, post
from litestar.di import NamedDependency
from litestar.enums import HttpMethod
from litestar.exceptions import NotFoundException, PermissionDeniedException
from litestar.params import FromPath, FromQuery
from litestar.plugins.htmx import HTMXRequest
from litestar.response import Redirect, Template
from sqlalchemy.ext.asyncio import AsyncSession

from app.accounts.cards import get_account, get_account_card, list_accounts
from app.accounts.connect import (
    SESSION_KEY,
    Connected,
    ConnectProblem,
    PendingConnect,
    account_token,
    begin_connect,
    check_callback,
    claim_state,
    complete_connect,
    disconnect_account,
    origin_to_resume,
    remember_origin,
    subscribe_webhooks,
    unsubscribe_webhooks,
)
from app.auth.current import Viewer, signed_in_viewer
from app.delivery_log.surge import load_surges
from app.operations.idempotency import Finished, Refused
from app.resources import Resources
from app.setup_doctor.run import forget_failures
from app.web.guards import ROLE_REFUSAL, editors_only
from app.web.htmx import wants_partial
from app.web.idempotency import idempotent, redirect_to
from app.web.reads import get_or_head

_NO_STORE = {"Cache-Control": "no-store"}


def _origin(request: HTMXRequest) -> str:
    """`scheme://host:port` the browser used for this request."""
    return f"{request.url.scheme}://{request.url.netloc}"


def _not_found() -> NotFoundException:
    return NotFoundException("No such account in this workspace.")


class AccountsController(Controller):
    path = "/accounts"

    @get_or_head("/", name="accounts")
    async def index(
        self,
        *,
        request: HTMXRequest,
        viewer: NamedDependency[Viewer],
        db_session: NamedDependency[AsyncSession],
        connect: FromQuery[str | None] = None,
        connected: FromQuery[int | None] = None,
        disconnected: FromQuery[str | None] = None,
    ) -> Template:
        accounts = await list_accounts(db_session, viewer.workspace_id)
        known = {problem.value for problem in ConnectProblem}
        problem = ConnectProblem(connect) if connect in known else None
        return Template(
            "accounts/index.html",
            context={
                "accounts": accounts,
                "problem": problem,
                "connected_id": connected,
                "disconnected": disconnected == "1",
                "welcome": "welcome" in request.query_params,
                "need_account": "need" in request.query_params,
                "reconnect": "reconnect" in request.query_params,
                "can_change": viewer.can_change,
            },
            headers=_NO_STORE,
        )

    @get_or_head("/{account_id:int}", name="account")
    async def detail(
        self,
        request: HTMXRequest,
        viewer: NamedDependency[Viewer],
        resources: NamedDependency[Resources],
        db_session: NamedDependency[AsyncSession],
        account_id: FromPath[int],
    ) -> Template:
        """The account's card, and its surge (comments waiting for the hourly limit), which
        refreshes itself: an htmx request gets only that part."""
        card = await get_account_card(db_session, viewer.workspace_id, account_id)
        if card is None:
            raise _not_found()
        surges = await load_surges(db_session, resources, viewer.workspace_id, account_id)
        return Template(
            "accounts/_surges.html" if wants_partial(request) else "accounts/detail.html",
            context={"account": card, "can_change": viewer.can_change, "surges": surges},
            headers={**_NO_STORE, "Vary": "HX-Request"},
        )

    @post("/connect", name="account_connect", status_code=200, guards=[editors_only])
    async def connect(
        self,
        request: HTMXRequest,
        viewer: NamedDependency[Viewer],
        resources: NamedDependency[Resources],
    ) -> Response[Any]:
        async def action(_: AsyncSession) -> Finished:
            url, pending = await begin_connect(
                resources.settings, workspace_id=viewer.workspace_id, user_id=viewer.user_id
            )
            request.session[SESSION_KEY] = pending.to_session()
            await remember_origin(resources.redis, pending.state, _origin(request))
            return redirect_to(url)

        return await idempotent(request, resources, viewer, scope="account.connect", action=action)

    # Not guarded by `editors_only`: a browser whose sign-in began under another name of this
    # server has no session here and is sent back there first; then the same checks apply.
    @get_or_head("/instagram/callback", name="instagram_callback")
    async def callback(
        self,
        request: HTMXRequest,
        db_session: NamedDependency[AsyncSession],
        resources: NamedDependency[Resources],
    ) -> Redirect:
        if request.method == HttpMethod.HEAD:
            # HEAD must be safe: a link checker or previewer may send it before the browser
            # comes back with GET, and acting on it would spend the state and the code.
            return Redirect("/accounts", status_code=303)
        state = request.query_params.get("state")
        resume = await origin_to_resume(
            resources.redis, state if isinstance(state, str) else "", _origin(request)
        )
        if resume is not None and SESSION_KEY not in request.session:
            return Redirect(f"{resume}{request.url.path}?{request.url.query}", status_code=303)
        viewer = await signed_in_viewer(request, db_session)
        if not viewer.can_change:
            raise PermissionDeniedException(ROLE_REFUSAL)
        pending = PendingConnect.from_session(request.session.pop(SESSION_KEY, None))
        params = {k: v for k, v in request.query_params.items() if isinstance(v, str)}
        problem = check_callback(
            pending, params, workspace_id=viewer.workspace_id, user_id=viewer.user_id
        )
        if problem is None and pending is not None:
            result = (
                await complete_connect(
                    resources,
                    workspace_id=viewer.workspace_id,
                    code=params["code"],
                    verifier=pending.verifier,
                )
                if await claim_state(resources.redis, pending.state)
                else ConnectProblem.STATE
            )
            if isinstance(result, Connected):
                await forget_failures(resources, viewer.workspace_id)
                return Redirect(f"/accounts?connected={result.account_id}", status_code=303)
            problem = result
        return Redirect(
            f"/accounts?connect={(problem or ConnectProblem.STATE).value}", status_code=303
        )

    @post(
        "/{account_id:int}/subscribe",
        name="account_subscribe",
        status_code=200,
        guards=[editors_only],
    )
    async def subscribe(
        self,
        request: HTMXRequest,
        viewer: NamedDependency[Viewer],
        resources: NamedDependency[Resources],
        account_id: FromPath[int],
    ) -> Response[Any]:
        async def action(session: AsyncSession) -> Finished | Refused[Response[Any]]:
            account = await get_account(session, viewer.workspace_id, account_id)
            token = account_token(resources, account) if account else None
            if account is None:
                raise _not_found()
            if token is None:
                return Refused(Redirect(f"/accounts/{account_id}", status_code=303))
            await subscribe_webhooks(resources, account.id, account.ig_user_id, token)
            return redirect_to(f"/accounts/{account_id}")

        return await idempotent(
            request, resources, viewer, scope="account.subscribe", action=action
        )

    @post(
        "/{account_id:int}/disconnect",
        name="account_disconnect",
        status_code=200,
        guards=[editors_only],
    )
    async def disconnect(
        self,
        request: HTMXRequest,
        viewer: NamedDependency[Viewer],
        resources: NamedDependency[Resources],
        account_id: FromPath[int],
    ) -> Response[Any]:
        token_holder: dict[str, str] = {}

        async def action(session: AsyncSession) -> Finished | Refused[Response[Any]]:
            account = await get_account(session, viewer.workspace_id, account_id)
            if account is None:
                raise _not_found()
            token = account_token(resources, account)
            if not await disconnect_account(session, viewer.workspace_id, account_id):
                return Refused(Redirect(f"/accounts/{account_id}", status_code=303))
            if token:
                token_holder[account.ig_user_id] = token
            return redirect_to("/accounts?disconnected=1")

        response = await idempotent(
            request, resources, viewer, scope="account.disconnect", action=action
        )
        for ig_user_id, token in token_holder.items():
            await unsubscribe_webhooks(resources.graph, ig_user_id, token)
        return response
