"""Request-scoped dependencies: the process resources and a database session per request.

The session is closed by `close_request_session` (a middleware), not by a generator
dependency: Litestar cleans a generator dependency up only when every dependency of the
request resolved, so a refusal raised by a later one (`LoginRequired`) or by a guard would
leave the session, and its pooled connection, to the garbage collector. A guard that needs
the database (`app.web.guards`) gets the same session as the handler.
"""

from __future__ import annotations

from typing import Any

from litestar.connection import ASGIConnection
from litestar.datastructures import State
from litestar.types import ASGIApp, Receive, Scope, Send
from sqlalchemy.ext.asyncio import AsyncSession

from app.resources import Resources

_SESSION_KEY = "db_session"


def provide_resources(state: State) -> Resources:
    resources: Resources = state.resources
    return resources


def provide_db_session(request: ASGIConnection[Any, Any, Any, Any]) -> AsyncSession:
    """The request's session, opened by whoever asks first (a guard or a dependency)."""
    opened = request.state.get(_SESSION_KEY)
    if isinstance(opened, AsyncSession):
        return opened
    # Nothing commits implicitly: a handler that writes commits itself, so a failed commit
    # surfaces as an error instead of a success page over lost data.
    resources: Resources = request.app.state.resources
    session = resources.sessionmaker()
    request.state[_SESSION_KEY] = session
    return session


def close_request_session(app: ASGIApp) -> ASGIApp:
    """Middleware: close the request's session once the answer is out, whatever happened."""

    async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await app(scope, receive, send)
        finally:
            state = scope.get("state")
            session = state.pop(_SESSION_KEY, None) if isinstance(state, dict) else None
            if isinstance(session, AsyncSession):
                await session.close()

    return middleware
