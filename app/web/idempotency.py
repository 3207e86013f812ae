"""Double-submit safety for dashboard forms and buttons, on top of `app.operations.idempotency`.

In a template, every state-changing form renders a fresh key::

    <form method="post" action="/campaigns/7/pause">
      {{ csrf_input | safe }}{{ idempotency_input() }}
      <button>Pause</button>
    </form>

and its handler runs the change through `idempotent(...)`::

    async def action(session: AsyncSession) -> Finished | Refused[Response[Any]]:
        if not await pause_campaign(session, viewer.workspace_id, campaign_id):
            return Refused(not_found_response)
        return redirect_to("/campaigns")

    return await idempotent(request, resources, viewer, scope="campaign.pause", action=action)

A repeat with the same key gets the first answer (the same redirect), a repeat while the first
is still running waits briefly and then gets a friendly "already in progress" (409), and a key
reused for a different request is refused (422). The key comes from the form field `_idem` or,
for scripts and htmx buttons without a form, the `Idempotency-Key` header.

Work that must follow the commit but cannot be part of it (enqueueing a job in Redis) goes in
`after_commit`: it runs once, only for the request whose action ran and committed, never for a
repeat. A crash between the commit and `after_commit` must be covered by a sweep (the delivery
log's retry relies on the due-work relay for that).
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from litestar import MediaType, Response
from litestar.plugins.htmx import HTMXRequest, HTMXTemplate
from litestar.response import Template
from markupsafe import Markup
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.current import Viewer
from app.operations.idempotency import (
    Finished,
    InProgress,
    KeyRequest,
    Mismatch,
    Ran,
    Refused,
    Replay,
    fingerprint_of,
    run_once,
)
from app.resources import Resources
from app.web.htmx import redirect, wants_partial

IDEMPOTENCY_FIELD = "_idem"
IDEMPOTENCY_HEADER = "idempotency-key"
_KEY_PATTERN = re.compile(r"^[A-Za-z0-9_-]{16,128}$")
# Fields that travel with every form but are not part of what was asked.
_NOT_FINGERPRINTED = {IDEMPOTENCY_FIELD, "_csrf_token"}

Action = Callable[[AsyncSession], Awaitable[Finished | Refused[Response[Any]]]]


def new_idempotency_key() -> str:
    return secrets.token_urlsafe(24)


def idempotency_input() -> Markup:
    """Template global: the hidden field carrying a fresh key."""
    # Safe: both the name and the url-safe random key are ours, nothing comes from a request.
    return Markup(  # noqa: S704
        f'<input type="hidden" name="{IDEMPOTENCY_FIELD}" value="{new_idempotency_key()}">'
    )


def redirect_to(location: str) -> Finished:
    """The stored answer "go to `location`" (303 for a form, HX-Redirect for htmx)."""
    return Finished({"status": 303, "location": location})


def as_response(request: HTMXRequest, stored: dict[str, Any]) -> Response[Any]:
    """Turn a stored answer back into an HTTP response, for the first request and repeats."""
    location = stored.get("location")
    if isinstance(location, str):
        return redirect(request, location)
    html = stored.get("html")
    return Response(
        content=html if isinstance(html, str) else "",
        status_code=int(stored.get("status", 200)),
        media_type=MediaType.HTML,
    )


def notice_response(request: HTMXRequest, status: int, title: str, message: str) -> Response[Any]:
    """A short notice: into the page's #flash area for htmx, else a small error page."""
    headers = {"Cache-Control": "no-store"}
    if wants_partial(request):
        # Show it in the page's notice area instead of replacing the form that was sent.
        return HTMXTemplate(
            template_name="partials/notice.html",
            context={"level": "warning", "title": title, "message": message},
            status_code=status,
            headers=headers,
            re_target="#flash",
            re_swap="innerHTML",
        )
    return Template(
        "error.html",
        context={"status": status, "title": title, "detail": message},
        status_code=status,
        headers=headers,
    )


def request_fingerprint(
    method: str, path: str, viewer: Viewer, fields: Iterable[tuple[str, str]]
) -> str:
    """What a form submission asked for, by whom; the same key must always ask the same."""
    asked = sorted((name, value) for name, value in fields if name not in _NOT_FINGERPRINTED)
    return fingerprint_of(method, path, viewer.user_id, viewer.workspace_id, asked)


def one_time_key(form: Any, request: HTMXRequest) -> str | None:
    """The form's one-time key (or the `Idempotency-Key` header), if it is well formed."""
    key = str(form.get(IDEMPOTENCY_FIELD) or request.headers.get(IDEMPOTENCY_HEADER) or "")
    return key if _KEY_PATTERN.match(key) else None


def missing_key_response(request: HTMXRequest) -> Response[Any]:
    return notice_response(
        request,
        400,
        "Please reload the page",
        "This form is missing its one-time token, so it was not sent. Reload and try again.",
    )


def unfinished_response(
    request: HTMXRequest, result: InProgress | Mismatch | Refused[Response[Any]]
) -> Response[Any]:
    """The answer to a key still running elsewhere, a key reused for another request, or a
    refusal the action returned."""
    if isinstance(result, InProgress):
        return notice_response(
            request,
            409,
            "Already in progress",
            "We are still working on the first click. This page will show the result "
            "once you reload it.",
        )
    if isinstance(result, Mismatch):
        return notice_response(
            request,
            422,
            "That form was already used",
            "This one-time token was used for a different change. Reload the page and try again.",
        )
    return result.payload


async def idempotent(
    request: HTMXRequest,
    resources: Resources,
    viewer: Viewer,
    *,
    scope: str,
    action: Action,
    settle_s: float = 2.0,
    after_commit: Callable[[], Awaitable[None]] | None = None,
) -> Response[Any]:
    form = await request.form()
    key = one_time_key(form, request)
    if key is None:
        return missing_key_response(request)
    fingerprint = request_fingerprint(
        request.method,
        request.url.path,
        viewer,
        [
            (name, value if isinstance(value, str) else getattr(value, "filename", ""))
            for name, value in form.multi_items()
        ],
    )
    result = await run_once(
        resources.sessionmaker,
        KeyRequest(
            scope=scope,
            key=key,
            fingerprint=fingerprint,
            user_id=viewer.user_id,
            workspace_id=viewer.workspace_id,
        ),
        action,
        settle_s=settle_s,
    )
    if isinstance(result, Ran) and after_commit is not None:
        await after_commit()
    if isinstance(result, Ran | Replay):
        return as_response(request, result.response)
    return unfinished_response(request, result)
