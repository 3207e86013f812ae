"""`/go/<token>`: the tracked link a fan taps in a DM, answered with a redirect.

The fan is waiting, so the answer needs nothing but this process: the token carries the
destination and is checked by its signature (`app.clicks.tokens`); the visit is appended to
the local click spool (`app.clicks.recorder.ClickRecorder.record`) and copied into PostgreSQL
in the background. PostgreSQL or Redis being down changes nothing here. A token that does not
verify gets a friendly 404 page. No cookie is set and no IP address is kept.

A plain ASGI route like the webhook, for the same reason: at a thousand clicks a second the
framework's request objects would cost more than the work.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from pathlib import Path

from litestar import Litestar, asgi
from litestar.types import Receive, Scope, Send

from app.clicks.links import LINK_PATH
from app.clicks.recorder import ClickRecorder, request_id_of
from app.clicks.spool import ClickSpool
from app.clicks.tokens import link_key, read_token
from app.clicks.visitors import classify
from app.resources import Resources

logger = logging.getLogger("oncereply.clicks")

NOT_FOUND_TEMPLATE = "links/not_found.html"
_REQUEST_ID = b"x-request-id"
_COMMON = [
    (b"cache-control", b"no-store"),
    (b"referrer-policy", b"strict-origin-when-cross-origin"),
    (b"x-robots-tag", b"noindex"),
]


# In the app's JSON error shape (`app/web/errors.py`): a link is only ever opened.
_WRONG_METHOD = json.dumps({"status_code": 405, "detail": "A link is opened with GET."}).encode()
_JSON = (b"content-type", b"application/json")


# A mount, since Litestar's ASGI routes take no path parameters. A mount answers every path
# that merely starts with its own (`/l` took `/login`), so its prefix must begin no other
# route (`tests/integration/test_tracked_links.py` checks). It hands the middleware the path
# after the prefix, so the CSRF check is switched off here rather than by path.
@asgi(
    LINK_PATH.rstrip("/"),
    name="tracked_link",
    is_mount=True,
    copy_scope=False,
    opt={"exclude_from_csrf": True},
)
async def tracked_link(scope: Scope, receive: Receive, send: Send) -> None:
    state = Litestar.from_scope(scope).state
    links: LinkService = state.links
    method = scope.get("method", "GET")
    if method not in {"GET", "HEAD"}:
        await _respond(send, 405, _WRONG_METHOD, [(b"allow", b"GET, HEAD"), _JSON])
        return
    token = _token_of(scope["path"])
    target = read_token(links.key, token)
    if target is None:
        body = b"" if method == "HEAD" else links.not_found_page
        await _respond(send, 404, body, [(b"content-type", b"text/html; charset=utf-8")])
        return
    headers = dict(scope["headers"])
    visit = classify(method, headers)
    try:
        links.recorder.record(token, target, visit, request_id_of(headers.get(_REQUEST_ID)))
    except OSError as exc:
        # The disk refused the line: the fan still gets where they were going.
        logger.error("a click could not be spooled: %s", exc)  # noqa: TRY400 - no trace needed
    await _respond(send, 302, b"", [(b"location", target.url.encode("utf-8"))])


def _token_of(path: str) -> str:
    """The token from the path the mount hands over (`/<token>/`; `/go/<token>` also read)."""
    rest = path.removeprefix(LINK_PATH.rstrip("/")) if path.startswith(LINK_PATH) else path
    rest = rest.strip("/")
    return "" if "/" in rest else rest


async def _respond(send: Send, status: int, body: bytes, extra: list[tuple[bytes, bytes]]) -> None:
    headers = [*_COMMON, (b"content-length", str(len(body)).encode()), *extra]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


class LinkService:
    """What the redirect needs, made once per process."""

    def __init__(self, key: bytes, recorder: ClickRecorder, not_found_page: bytes) -> None:
        self.key = key
        self.recorder = recorder
        self.not_found_page = not_found_page


@asynccontextmanager
async def tracked_links_lifespan(app: Litestar) -> AsyncGenerator[None, None]:
    """The click recorder for this process; needs `app.state.resources` opened first."""
    resources: Resources = app.state.resources
    settings = resources.settings
    recorder = ClickRecorder(resources.engine, ClickSpool(Path(settings.click_spool_dir)))
    engine = app.template_engine
    if engine is None:
        raise RuntimeError("the tracked-link page needs the app's template engine")
    page = engine.get_template(NOT_FOUND_TEMPLATE).render().encode("utf-8")
    app.state.links = LinkService(link_key(settings.secret_key), recorder, page)
    recorder.start()
    try:
        yield
    finally:
        await recorder.close()
