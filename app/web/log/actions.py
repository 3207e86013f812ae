"""The log's buttons, owners and admins only: retry a delivery (from its row or its
timeline), retry the ticked rows, and "check the conversation again" for an UNCONFIRMED one.

Each runs through `app.web.idempotency`: the row change and the key's answer commit together,
and the job is enqueued after that commit (`after_commit`). A retry from a row answers with
the row redrawn in place; elsewhere the answer is a redirect to the timeline or the table.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from litestar import Response, post
from litestar.di import NamedDependency
from litestar.exceptions import NotFoundException
from litestar.params import FromPath
from litestar.plugins.htmx import HTMXRequest
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.current import Viewer, safe_next
from app.db.bounds import parse_id
from app.delivery.recovery.manual_retry import RetryStatus, mark_retry
from app.delivery.send.scheduling import enqueue_delivery
from app.delivery_log.actions import (
    NOTHING_SELECTED,
    enqueue_inbox_check,
    enqueue_retries,
    mark_bulk_retry,
    mark_inbox_check,
)
from app.delivery_log.queries import fetch_row, workspace_names
from app.operations.idempotency import Finished, Refused
from app.resources import Resources
from app.web.guards import editors_only
from app.web.htmx import redirect, wants_partial
from app.web.idempotency import idempotent, notice_response, redirect_to
from app.web.log.rows import render_row

# A page shows at most this many rows to tick; more ids than that are not a person's.
MAX_BULK_IDS = 500


@post("/{dm_log_id:int}/retry", name="log_retry", status_code=200, guards=[editors_only])
async def retry(
    request: HTMXRequest,
    viewer: NamedDependency[Viewer],
    resources: NamedDependency[Resources],
    db_session: NamedDependency[AsyncSession],
    dm_log_id: FromPath[int],
) -> Response[Any]:
    form = await request.form()
    confirmed = form.get("confirm") == "1"
    in_row = wants_partial(request) and form.get("from") == "row"
    names = await workspace_names(db_session, viewer.workspace_id) if in_row else None
    due: list[datetime | None] = []

    async def action(session: AsyncSession) -> Finished | Refused[Response[Any]]:
        result = await mark_retry(
            session,
            workspace_id=viewer.workspace_id,
            dm_log_id=dm_log_id,
            confirm_unconfirmed=confirmed,
        )
        if result.status is RetryStatus.NOT_FOUND:
            raise NotFoundException("No such delivery in this workspace.")
        if result.status is RetryStatus.NEEDS_CONFIRMATION:
            return Refused(redirect(request, f"/log/{dm_log_id}#retry-panel"))
        if result.status is RetryStatus.NOT_RETRYABLE:
            return Refused(notice_response(request, 409, "Not retried", result.message))
        due.append(result.due)
        if names is not None:
            row = await fetch_row(session, viewer.workspace_id, dm_log_id)
            assert row is not None  # noqa: S101 - just updated in this transaction
            return Finished({"status": 200, "html": render_row(request, row, names, viewer)})
        return redirect_to(f"/log/{dm_log_id}?notice=retried")

    async def enqueue() -> None:
        await enqueue_delivery(resources.queue, dm_log_id, due[0])

    return await idempotent(
        request, resources, viewer, scope="delivery.retry", action=action, after_commit=enqueue
    )


@post("/retry", name="log_bulk_retry", status_code=200, guards=[editors_only])
async def bulk_retry(
    request: HTMXRequest,
    viewer: NamedDependency[Viewer],
    resources: NamedDependency[Resources],
) -> Response[Any]:
    form = await request.form()
    found = (parse_id(v) for v in form.getall("ids", [])[:MAX_BULK_IDS])
    ids = [i for i in found if i is not None]
    back = safe_next(str(form.get("back") or "/log"))
    if not ids:
        if wants_partial(request):
            return notice_response(request, 422, "Nothing selected", NOTHING_SELECTED)
        # A plain form post goes back to the log it came from, which says what to do.
        joiner = "&" if "?" in back else "?"
        return redirect(request, f"{back}{joiner}retried=none")
    queued: dict[int, datetime | None] = {}

    async def action(session: AsyncSession) -> Finished | Refused[Response[Any]]:
        result = await mark_bulk_retry(session, workspace_id=viewer.workspace_id, dm_log_ids=ids)
        queued.update(result.queued)
        joiner = "&" if "?" in back else "?"
        return redirect_to(f"{back}{joiner}retried={len(result.queued)}&refused={result.refused}")

    async def enqueue() -> None:
        await enqueue_retries(resources.queue, queued)

    return await idempotent(
        request,
        resources,
        viewer,
        scope="delivery.bulk_retry",
        action=action,
        after_commit=enqueue,
    )


@post("/{dm_log_id:int}/check", name="log_check", status_code=200, guards=[editors_only])
async def check(
    request: HTMXRequest,
    viewer: NamedDependency[Viewer],
    resources: NamedDependency[Resources],
    dm_log_id: FromPath[int],
) -> Response[Any]:
    async def action(session: AsyncSession) -> Finished | Refused[Response[Any]]:
        if await mark_inbox_check(
            session,
            workspace_id=viewer.workspace_id,
            dm_log_id=dm_log_id,
            requested_by=viewer.email,
        ):
            return redirect_to(f"/log/{dm_log_id}?notice=checking")
        if await fetch_row(session, viewer.workspace_id, dm_log_id) is None:
            raise NotFoundException("No such delivery in this workspace.")
        # No longer UNCONFIRMED: show the delivery as it is now.
        return Refused(redirect(request, f"/log/{dm_log_id}"))

    async def enqueue() -> None:
        await enqueue_inbox_check(resources.queue, dm_log_id)

    return await idempotent(
        request, resources, viewer, scope="delivery.check", action=action, after_commit=enqueue
    )
