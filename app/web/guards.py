"""Route guards: who may use a route, declared on the route itself.

`guards=[editors_only]` marks a route that changes the workspace: owners and admins pass,
members get 403 with a sentence saying why (they may know the thing exists, they just cannot
change it), and someone not signed in gets `LoginRequired` first, as with the `viewer`
dependency. A guard runs before the handler's dependencies; the viewer it loads is the one
the handler's `viewer` parameter then gets, from the same database session.
"""

from __future__ import annotations

from typing import Any

from litestar.connection import ASGIConnection
from litestar.exceptions import PermissionDeniedException
from litestar.handlers import BaseRouteHandler

from app.auth.current import signed_in_viewer
from app.web.deps import provide_db_session

ROLE_REFUSAL = (
    "Your role in this workspace lets you see everything but not change it. Ask an owner or admin."
)


async def editors_only(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
    viewer = await signed_in_viewer(connection, provide_db_session(connection))
    if not viewer.can_change:
        raise PermissionDeniedException(ROLE_REFUSAL)
