"""`/setup`: the setup doctor, for owners and admins.

The page runs every check afresh (the webhook handshake through PUBLIC_BASE_URL and, per
account, calls to Instagram), so it is a page one opens, never one that polls. Re-subscribe
asks Instagram for the account's webhook fields again and comes back to the page.
"""

from __future__ import annotations

from typing import Any

from litestar import Controller, Response, post
from litestar.di import NamedDependency
from litestar.exceptions import NotFoundException
from litestar.params import FromPath
from litestar.plugins.htmx import HTMXRequest
from litestar.response import Template
from sqlalchemy.ext.asyncio import AsyncSession

from app.accounts.cards import get_account
from app.accounts.connect import account_token, subscribe_webhooks
from app.auth.current import Viewer
from app.operations.idempotency import Finished, Refused
from app.resources import Resources
from app.setup_doctor.run import run_doctor
from app.web.guards import editors_only
from app.web.htmx import redirect
from app.web.idempotency import idempotent, redirect_to
from app.web.reads import get_or_head


class SetupDoctorController(Controller):
    path = "/setup"
    guards = [editors_only]  # noqa: RUF012 - Litestar reads the class attribute

    @get_or_head("/", name="setup_doctor")
    async def page(
        self,
        viewer: NamedDependency[Viewer],
        resources: NamedDependency[Resources],
        db_session: NamedDependency[AsyncSession],
    ) -> Template:
        report = await run_doctor(resources, db_session, viewer.workspace_id)
        return Template(
            "setup/index.html",
            context={
                "report": report,
                "base_url": resources.settings.public_base_url,
                "verify_token_hint": "WEBHOOK_VERIFY_TOKEN",
            },
            headers={"Cache-Control": "no-store"},
        )

    @post("/accounts/{account_id:int}/subscribe", name="setup_resubscribe", status_code=200)
    async def resubscribe(
        self,
        request: HTMXRequest,
        viewer: NamedDependency[Viewer],
        resources: NamedDependency[Resources],
        account_id: FromPath[int],
    ) -> Response[Any]:
        async def action(session: AsyncSession) -> Finished | Refused[Response[Any]]:
            account = await get_account(session, viewer.workspace_id, account_id)
            if account is None:
                raise NotFoundException("No such account in this workspace.")
            token = account_token(resources, account)
            if token is None:
                return Refused(redirect(request, f"/setup#account-{account_id}"))
            await subscribe_webhooks(resources, account.id, account.ig_user_id, token)
            return redirect_to(f"/setup#account-{account_id}")

        return await idempotent(
            request, resources, viewer, scope="setup.resubscribe", action=action
        )
