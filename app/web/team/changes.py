"""Running one change of the team under the form's one-time key, and what a refusal says.

A refusal from `app.workspaces` becomes a notice (into the page's notice area for htmx, else
a short page): 403 for a role that may not, 409 for the last owner, 422 for the rest; an
unknown member or invite is a 404. Success goes back to the Team page saying what was done.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from litestar import Response
from litestar.exceptions import NotFoundException
from litestar.plugins.htmx import HTMXRequest
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.current import Viewer
from app.operations.idempotency import Finished, Refused
from app.resources import Resources
from app.web.idempotency import idempotent, notice_response, redirect_to
from app.workspaces.roles import Problem, Refusal


def refused(request: HTMXRequest, refusal: Refusal) -> Response[Any]:
    if refusal.problem is Problem.NOT_FOUND:
        raise NotFoundException(refusal.message)
    if refusal.problem is Problem.FORBIDDEN:
        return notice_response(request, 403, "Not allowed", refusal.message)
    if refusal.problem is Problem.LAST_OWNER:
        return notice_response(request, 409, "A workspace needs an owner", refusal.message)
    return notice_response(request, 422, "Nothing was changed", refusal.message)


async def change_team(
    request: HTMXRequest,
    resources: Resources,
    viewer: Viewer,
    *,
    scope: str,
    done: str,
    change: Callable[[AsyncSession], Awaitable[Refusal | None]],
    after_commit: Callable[[], Awaitable[None]] | None = None,
) -> Response[Any]:
    """Run one change of the team under the form's one-time key: a refusal becomes a notice,
    success goes back to the Team page saying `done` (a key of `page.NOTICES`); `after_commit`
    runs once the change is committed (a job to enqueue)."""

    async def action(session: AsyncSession) -> Finished | Refused[Response[Any]]:
        refusal = await change(session)
        if refusal is not None:
            return Refused(refused(request, refusal))
        return redirect_to(f"/team?notice={done}")

    return await idempotent(
        request, resources, viewer, scope=scope, action=action, after_commit=after_commit
    )
