"""Error pages: people get a short page, machines get JSON, nobody gets a stack trace.

`login_redirect` answers `LoginRequired` (no valid session): people go to the sign-in page,
which brings them back afterwards; scripts get 401 JSON.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import quote

from litestar import MediaType, Request, Response
from litestar.exceptions import HTTPException
from litestar.plugins.htmx import ClientRedirect, HTMXRequest
from litestar.response import Redirect, Template

from app.auth.current import LoginRequired, safe_next
from app.web.htmx import wants_partial
from app.web.report import HEADERS as REPORT_HEADERS
from app.web.report import is_report_path, report_not_found

logger = logging.getLogger("oncereply.web")

_TITLES = {
    400: "That request did not make sense",
    401: "Please sign in",
    403: "Not allowed",
    404: "Not found",
    405: "Not allowed",
    413: "Too large",
    429: "Slow down",
    500: "Something went wrong on our side",
    503: "Temporarily unavailable",
}


def _path(request: Request[Any, Any, Any]) -> str:
    """The request's path, read from the scope: `request.url` fails on a Host header no URL
    can be built from, and these handlers answer that request too."""
    return str(request.scope.get("root_path", "")) + request.scope["path"]


def _wants_html(request: Request[Any, Any, Any]) -> bool:
    return "text/html" in request.headers.get("accept", "")


def _render(request: Request[Any, Any, Any], status: int, detail: str) -> Response[Any]:
    if _wants_html(request):
        return Template(
            "error.html",
            context={"status": status, "title": _TITLES.get(status, "Error"), "detail": detail},
            status_code=status,
        )
    return Response(
        {"status_code": status, "detail": detail}, status_code=status, media_type=MediaType.JSON
    )


def http_exception_handler(request: Request[Any, Any, Any], exc: HTTPException) -> Response[Any]:
    if is_report_path(_path(request)) and exc.status_code < 500:
        # A shared report's address in any shape: its own page, never the dashboard's.
        return report_not_found(exc.status_code, exc.headers)
    response = _render(request, exc.status_code, exc.detail)
    if exc.headers:
        response.headers.update(exc.headers)
    return response


def internal_error_handler(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    # The details go to the log for the operator; the person sees a calm page.
    path = _path(request)
    logger.exception("unhandled error on %s %s", request.method, path, exc_info=exc)
    response = _render(request, 500, "The error was logged. Please try again in a moment.")
    if is_report_path(path):
        response.headers.update(REPORT_HEADERS)
    return response


def login_redirect(request: Request[Any, Any, Any], exc: LoginRequired) -> Response[Any]:
    partial = request if isinstance(request, HTMXRequest) and wants_partial(request) else None
    if partial is None and not _wants_html(request):
        return Response(
            {"status_code": 401, "detail": "Please sign in"},
            status_code=401,
            media_type=MediaType.JSON,
        )
    query = request.scope.get("query_string", b"").decode("latin-1")
    here = _path(request) + (f"?{query}" if query else "")
    if partial is not None:
        # A partial is no page to come back to; return to the page it was part of.
        here = partial.htmx.current_url_abs_path or "/"
    elif request.method != "GET":
        here = "/"  # a form's POST address is no page to come back to
    target = "/login" if safe_next(here) == "/" else f"/login?next={quote(safe_next(here))}"
    if partial is not None:
        return ClientRedirect(target)
    return Redirect(target, status_code=303)
