"""The edge of every route: path ids checked against what the database can hold.

Litestar turns a `{name:int}` path segment into a Python int of any size; an id past
PostgreSQL's `bigint` (or zero, or negative) would only fail inside the query, as a 500. This
middleware answers 404 for such an id before any handler runs, so every route, present and
future, gets the same answer without checking its own ids. Query strings and forms are parsed
with `app.db.bounds` by the code that reads them.
"""

from __future__ import annotations

from collections.abc import Mapping

from litestar.exceptions import NotFoundException
from litestar.types import ASGIApp, Receive, Scope, Send

from app.db.bounds import id_in_range


def path_ids_in_range(app: ASGIApp) -> ASGIApp:
    """Middleware: 404 for an integer path parameter that cannot be a row's id."""

    async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
        # Typed as strings, but by now Litestar has converted `{name:int}` segments to int.
        params: Mapping[str, object] = scope.get("path_params") or {}
        for value in params.values():
            if isinstance(value, int) and not id_in_range(value):
                raise NotFoundException("Not found.")
        await app(scope, receive, send)

    return middleware
