"""`/log/{id}`: one delivery's timeline, with the evidence behind its state and every call to
Meta. While the delivery may still change, the open timeline re-asks every 3 s with the
version it shows, and gets a 204 until there is something new."""

from __future__ import annotations

from typing import Any

from litestar import Response
from litestar.di import NamedDependency
from litestar.exceptions import NotFoundException
from litestar.params import FromPath
from litestar.plugins.htmx import HTMXRequest
from litestar.response import Template
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.current import Viewer
from app.delivery_log.evidence import describe_evidence
from app.delivery_log.misses import MISS_REASONS, VERDICTS
from app.delivery_log.queries import (
    fetch_row,
    fetch_timeline,
    state_sentence,
    unconfirmed_why,
    workspace_names,
)
from app.web.htmx import wants_partial
from app.web.log.paging import HEADERS, NO_STORE
from app.web.log.rows import row_context
from app.web.reads import get_or_head

# What the buttons (`app.web.log.actions`) say on the timeline they land on.
NOTICES = {
    "retried": "Retry queued: the DM will be sent again in a moment.",
    "checking": "Looking in the conversation now; the result appears here in a few seconds.",
}


@get_or_head("/{dm_log_id:int}", name="log_entry")
async def entry(
    request: HTMXRequest,
    viewer: NamedDependency[Viewer],
    db_session: NamedDependency[AsyncSession],
    dm_log_id: FromPath[int],
) -> Template | Response[Any]:
    partial = wants_partial(request)
    seen = request.query_params.get("v")
    if partial and seen:
        # The open timeline polls every 3 s: answer "unchanged" from the summary row alone.
        current = await fetch_row(db_session, viewer.workspace_id, dm_log_id)
        if current is not None and seen == str(current.version):
            return Response(content=b"", status_code=204, headers=NO_STORE)
    timeline = await fetch_timeline(db_session, viewer.workspace_id, dm_log_id)
    if timeline is None:
        raise NotFoundException("No such delivery in this workspace.")
    names = await workspace_names(db_session, viewer.workspace_id)
    notice = NOTICES.get(request.query_params.get("notice") or "")
    context = {
        **row_context(names, viewer),
        "t": timeline,
        "row": timeline.row,
        "log": timeline.log,
        "sentence": state_sentence(timeline),
        "unconfirmed_why": unconfirmed_why(timeline),
        "evidence": describe_evidence(timeline.log.pr_evidence),
        "verdicts": VERDICTS,
        "miss_reasons": MISS_REASONS,
        "notice": notice,
    }
    template = "log/_timeline.html" if partial else "log/entry.html"
    return Template(template, context=context, headers=HEADERS)
