"""Route guards: who may use a route, declared on the route itself.

`guards=[editors_only]` marks a route that changes the workspace: owners and admins pass,
members get 403 with a sentence saying why (they may know the thing exists, they just cannot
change it), and someone not signed in gets `LoginRequired` first, as with the `viewer`
dependency. A guard runs before the handler's dependencies; the viewer it loads is the one
the handler's `viewer` parameter then gets, from the same database session.
`guards=[owners_only]` is the same for what only an owner may do (sharing a campaign's report).
"""

from __future__ import annotations

from typing import Any

from litestar.connection import ASGIConnection
from litestar.exceptions import PermissionDeniedException
from litestar.handlers import BaseRouteHandler

from app.auth.current import signed_in_viewer
from app.db.models import Role
from app.web.deps import provide_db_session

ROLE_REFUSAL = (
    "Your role in this workspace lets you see everything but not change it. Ask an owner or admin."
)


async def editors_only(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
    viewer = await signed_in_viewer(connection, provide_db_session(connection))
    if not viewer.can_change:
        raise PermissionDeniedException(ROLE_REFUSAL)


OWNER_REFUSAL = "Only an owner of this workspace can do this. Ask an owner."


async def owners_only(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
    """Owners pass (shared reports show a campaign outside the workspace); members get 403
    with `editors_only`'s sentence, admins with this one; someone not signed in gets
    `LoginRequired` first."""
    viewer = await signed_in_viewer(connection, provide_db_session(connection))
    if not viewer.can_change:
        raise PermissionDeniedException(ROLE_REFUSAL)
    if viewer.role is not Role.OWNER:
        raise PermissionDeniedException(OWNER_REFUSAL)
