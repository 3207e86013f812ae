"""Meta's app-level callbacks: deauthorize, data deletion, and the deletion status page.

Paste into the App Dashboard (Instagram → API setup with Instagram login → Business login
settings): `<PUBLIC_BASE_URL>/meta/deauthorize` and `<PUBLIC_BASE_URL>/meta/data-deletion`.
Meta POSTs a form with one `signed_request`; it authenticates by its HMAC, not by a session,
so these routes are CSRF-exempt like the webhook. A missing or malformed one answers 400, a
wrong signature 401 (and a throttled event), and nothing changes. The data-deletion answer is
the JSON Meta asks for: the status page's URL and the confirmation code.
"""

from __future__ import annotations

from typing import Any

from litestar import Controller, Request, Response, post
from litestar.di import NamedDependency
from litestar.exceptions import NotFoundException
from litestar.params import FromPath
from litestar.response import Template
from sqlalchemy.ext.asyncio import AsyncSession

from app.accounts.meta_callbacks import (
    deauthorize,
    delete_user_data,
    deletion_receipt,
    status_url,
)
from app.instagram.signed_request import (
    SignedRequest,
    SignedRequestError,
    SignedRequestProblem,
    parse_signed_request,
)
from app.operations.alerts import record_throttled
from app.resources import Resources
from app.web.reads import get_or_head

_NO_STORE = {"Cache-Control": "no-store"}


def _refusal(status: int, detail: str) -> Response[Any]:
    return Response(
        {"status_code": status, "detail": detail}, status_code=status, headers=_NO_STORE
    )


async def _verified(
    request: Request[Any, Any, Any], resources: Resources, callback: str
) -> SignedRequest | Response[Any]:
    try:
        form = await request.form()
        raw = form.get("signed_request")
        return parse_signed_request(
            raw if isinstance(raw, str) else None, resources.settings.webhook_secrets
        )
    except SignedRequestError as exc:
        if exc.problem is not SignedRequestProblem.MISMATCH:
            return _refusal(400, str(exc))
        await record_throttled(
            resources.sessionmaker,
            resources.redis,
            kind="meta_callback_signature_invalid",
            source="web",
            message=f"refused a {callback} callback: signed_request signature mismatch",
            details={"callback": callback},
        )
        return _refusal(401, str(exc))


class MetaCallbacksController(Controller):
    path = "/meta"

    @post("/deauthorize", name="meta_deauthorize", status_code=200)
    async def deauthorize(
        self, request: Request[Any, Any, Any], resources: NamedDependency[Resources]
    ) -> Response[Any]:
        verified = await _verified(request, resources, "deauthorize")
        if isinstance(verified, Response):
            return verified
        async with resources.sessionmaker() as session, session.begin():
            changed = await deauthorize(session, verified)
        return Response({"ok": True, "accounts_disconnected": len(changed)}, headers=_NO_STORE)

    @post("/data-deletion", name="meta_data_deletion", status_code=200)
    async def data_deletion(
        self, request: Request[Any, Any, Any], resources: NamedDependency[Resources]
    ) -> Response[Any]:
        verified = await _verified(request, resources, "data deletion")
        if isinstance(verified, Response):
            return verified
        async with resources.sessionmaker() as session, session.begin():
            receipt = await delete_user_data(session, verified)
        code = receipt.confirmation_code
        return Response(
            {
                "url": status_url(resources.settings.public_base_url, code),
                "confirmation_code": code,
            },
            headers=_NO_STORE,
        )

    @get_or_head("/data-deletion/{code:str}", name="meta_data_deletion_status")
    async def status(
        self, db_session: NamedDependency[AsyncSession], code: FromPath[str]
    ) -> Template:
        receipt = await deletion_receipt(db_session, code) if len(code) <= 32 else None
        if receipt is None:
            raise NotFoundException("No data deletion request has this confirmation code.")
        return Template(
            "meta/deletion_status.html", context={"receipt": receipt}, headers=_NO_STORE
        )
