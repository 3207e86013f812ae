"""The edge of every route: the Host header, path parameters and query strings checked
against what the app and the database can read.

`addressable_host` answers 400 for a Host header no URL can be built from (a port past 65535,
a port that is not digits, a bracket left open): every page, every redirect and the error
pages themselves read the request's URL, so such a request would fail wherever it got to.

Litestar turns a `{name:int}` path segment into a Python int of any size; an id past
PostgreSQL's `bigint` (or zero, or negative) would only fail inside the query, as a 500. A NUL
character cannot be in any PostgreSQL text, so a path segment or query string carrying one
would fail there too. This middleware answers 404 (a path) or 400 (a query string) before any
handler runs, so every route, present and future, gets the same answer without checking its
own. `readable_forms` does the same for a form's body (400), which it reads first and hands
on unchanged: a NUL, a file (no form of ours takes one), or a part whose text is not in the
character set it names (Litestar's form parser would raise on it as a 500 wherever the form
was first read). `readable_csrf_tokens` answers 403, as a wrong token gets, for a CSRF token
that is not ASCII text, which Litestar's check cannot compare. Query values and forms are
parsed with `app.db.bounds` by the code that reads them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import SplitResult

from litestar import Request
from litestar.config.csrf import CSRFConfig
from litestar.datastructures import UploadFile
from litestar.enums import ScopeType
from litestar.exceptions import NotFoundException, PermissionDeniedException, ValidationException
from litestar.handlers import HTTPRouteHandler
from litestar.types import ASGIApp, HTTPRequestEvent, Receive, ReceiveMessage, Scope, Send
from litestar.utils.scope.state import ScopeState

from app.db.bounds import id_in_range

# No file system this runs on takes a name longer than 255 bytes or a path past a few
# thousand; a longer one (a static file's path) would fail as an OSError inside the handler.
MAX_NAME_BYTES = 255
MAX_PATH_BYTES = 2048
_FORM_TYPES = (b"application/x-www-form-urlencoded", b"multipart/form-data")
BAD_HOST = "The address this request was sent to (its Host header) is not a valid web address."
UNREADABLE_FORM = "The form could not be read: its text is not in the character set it names."
FILE_IN_FORM = "This form takes no files."
CSRF_FIELD = "_csrf_token"
# Litestar's own words for a token that does not match.
CSRF_REFUSAL = "CSRF token verification failed"


def _text_segment_ok(value: str) -> bool:
    """A text path parameter (a str or a static file's Path) that any handler can look up."""
    if "\x00" in value or len(value.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
        return False
    return all(
        len(part.encode("utf-8", "surrogatepass")) <= MAX_NAME_BYTES for part in value.split("/")
    )


def addressable_host(app: ASGIApp) -> ASGIApp:
    """Middleware: 400 for a Host header whose port `request.url` cannot read."""

    async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
        for name, value in scope.get("headers") or ():
            if name == b"host":
                try:
                    # How Litestar's URL reads it (a SplitResult's port), for every page.
                    SplitResult("", value.decode("latin-1"), "", "", "").port  # noqa: B018
                except ValueError:
                    raise ValidationException(BAD_HOST) from None
                break
        await app(scope, receive, send)

    return middleware


def path_ids_in_range(app: ASGIApp) -> ASGIApp:
    """Middleware: 404 for an integer path parameter that cannot be a row's id or a text one
    with a NUL or a name too long for a file system; 400 for a query string with a NUL."""

    async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
        # Typed as strings, but by now Litestar has converted `{name:int}` segments to int.
        params: Mapping[str, object] = scope.get("path_params") or {}
        for value in params.values():
            if isinstance(value, int) and not id_in_range(value):
                raise NotFoundException("Not found.")
            if not isinstance(value, int) and not _text_segment_ok(str(value)):
                raise NotFoundException("Not found.")
        query = scope.get("query_string", b"")
        if b"%00" in query or b"\x00" in query:
            raise ValidationException("The address carries a NUL character.")
        await app(scope, receive, send)

    return middleware


def _form_type(scope: Scope) -> bytes | None:
    for name, value in scope.get("headers") or ():
        if name == b"content-type":
            kind = value.split(b";", 1)[0].strip().lower()
            return kind if kind in _FORM_TYPES else None
    return None


def _declared_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers") or ():
        if name == b"content-length":
            return int(value) if value.isdigit() else None
    return None


def readable_forms(max_body_bytes: int) -> Callable[[ASGIApp], ASGIApp]:
    """Middleware: 400 for a form body carrying a NUL, raw or `%00`-escaped, a file, or a
    part that does not decode. The body is read here, up to `max_body_bytes`, parsed as
    Litestar parses it (which keeps the result for everyone after) and replayed to the
    handler; a longer one is handed on unread, for the app's body limit to refuse."""

    def wrap(app: ASGIApp) -> ASGIApp:
        async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
            kind = _form_type(scope) if scope["type"] == ScopeType.HTTP else None
            declared = _declared_length(scope)
            if kind is None or (declared is not None and declared > max_body_bytes):
                await app(scope, receive, send)
                return
            body = bytearray()
            more = True
            while more and len(body) <= max_body_bytes:
                message = await receive()
                if message["type"] != "http.request":
                    await app(scope, _replay(message, receive), send)
                    return
                body += message.get("body", b"")
                more = message.get("more_body", False)
            if not more and (b"\x00" in body or (kind == _FORM_TYPES[0] and b"%00" in body)):
                raise ValidationException("The form carries a NUL character.")
            first: HTTPRequestEvent = {
                "type": "http.request",
                "body": bytes(body),
                "more_body": more,
            }
            # A plain ASGI route (the webhook, the tracked links) reads its own body.
            if not more and isinstance(scope.get("route_handler"), HTTPRouteHandler):
                await _parse_form(scope, _replay(first, receive))
            await app(scope, _replay(first, receive), send)

        return middleware

    return wrap


async def _parse_form(scope: Scope, receive: Receive) -> None:
    """Parse the form as every later reader will get it, refusing what it cannot hold."""
    request: Request[Any, Any, Any] = Request(scope, receive)
    try:
        form = await request.form()
    except (LookupError, UnicodeDecodeError):  # a charset Python lacks, bytes not in it
        raise ValidationException(UNREADABLE_FORM) from None
    files = [value for _, value in form.multi_items() if isinstance(value, UploadFile)]
    for file in files:
        await file.close()
    if files:
        raise ValidationException(FILE_IN_FORM)


def readable_csrf_tokens(config: CSRFConfig) -> Callable[[ASGIApp], ASGIApp]:
    """Middleware: 403 for a request Litestar's CSRF check would compare whose token (the
    header, the cookie, the form's field) is not ASCII text: `secrets.compare_digest` raises
    on such a string. Placed after `readable_forms`, whose parsed form it reads."""
    excluded = [config.exclude] if isinstance(config.exclude, str) else config.exclude or []
    exempt = re.compile("|".join(f"(?:{pattern})" for pattern in excluded)) if excluded else None
    header = config.header_name.lower()

    def wrap(app: ASGIApp) -> ASGIApp:
        async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
            if (
                scope["type"] == ScopeType.HTTP
                and scope.get("method", "GET") not in config.safe_methods
                and not (exempt and exempt.match(scope.get("path", "")))
                and not _opted_out(scope, config.exclude_from_csrf_key)
            ):
                request: Request[Any, Any, Any] = Request(scope, receive)
                tokens: list[object] = [
                    request.headers.get(header),
                    request.cookies.get(config.cookie_name),
                ]
                form = ScopeState.from_scope(scope).form
                if isinstance(form, dict):
                    field = form.get(CSRF_FIELD)
                    tokens += field if isinstance(field, list) else [field]
                if not all(t is None or (isinstance(t, str) and t.isascii()) for t in tokens):
                    raise PermissionDeniedException(CSRF_REFUSAL)
            await app(scope, receive, send)

        return middleware

    return wrap


def _opted_out(scope: Scope, key: str) -> bool:
    """The route's handler is marked as exempt from the CSRF check (`opt`)."""
    handler = scope.get("route_handler")
    return bool(handler is not None and handler.opt.get(key))


def _replay(first: ReceiveMessage, receive: Receive) -> Receive:
    """`receive` with `first` given back before anything else."""
    given = False

    async def replay() -> ReceiveMessage:
        nonlocal given
        if given:
            return await receive()
        given = True
        return first

    return replay
