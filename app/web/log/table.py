"""The delivery log's table (`/log`) and its live updates (`/log/updates`).

Live updates are htmx polling, every 3 s while the tab is visible: the poller sends the live
window of the first page and the `id:version` of every row it shows that may still change;
the answer prepends rows it did not show yet and replaces changed rows in place (out-of-band
swaps), so filters, the page and the scroll position stay where they are. Polling rather
than server-sent events: it needs no connection per open tab, no notification channel from
the worker, survives web restarts and proxies as is, and each poll is two indexed reads (or
a 204 when nothing changed).
"""

from __future__ import annotations

from typing import Any

from litestar import Response
from litestar.di import NamedDependency
from litestar.plugins.htmx import HTMXRequest
from litestar.response import Template
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.current import Viewer
from app.db.models import LegState
from app.delivery_log.actions import NOTHING_SELECTED
from app.delivery_log.filters import SKIPPED, LiveWindow, LogFilter
from app.delivery_log.queries import (
    fetch_changed,
    fetch_new,
    fetch_page,
    parse_versions,
    workspace_names,
)
from app.delivery_log.words import TRIGGER_WORDS, state_words
from app.web.log.paging import NO_STORE, cursors, page_or_results, pager, url
from app.web.log.rows import row_context
from app.web.reads import get_or_head


@get_or_head("/", name="log")
async def log_table(
    request: HTMXRequest,
    viewer: NamedDependency[Viewer],
    db_session: NamedDependency[AsyncSession],
) -> Template:
    params = request.query_params
    f = LogFilter.parse(params)
    before, after = cursors(request)
    page = await fetch_page(db_session, viewer.workspace_id, f, before=before, after=after)
    names = await workspace_names(db_session, viewer.workspace_id)
    items = f.items()
    poll_items = items + ([("window", page.live.encode())] if page.live else [])
    retried = params.get("retried")
    context = {
        **row_context(names, viewer),
        **pager("/log", items, page, before, after),
        "f": f,
        "page": page,
        "poll_url": url("/log/updates", poll_items),
        "export_url": url("/log/export.csv", items),
        "state_options": _state_options(),
        "trigger_options": [(kind.value, words) for kind, words in TRIGGER_WORDS.items()],
        "notice": (
            f"{retried} deliveries queued for retry." + _refused_note(params.get("refused"))
            if retried and retried.isdigit()
            else None
        ),
        "warning": f"Nothing was retried. {NOTHING_SELECTED}" if retried == "none" else None,
    }
    return page_or_results(request, context, full="log/index.html", partial="log/_results.html")


@get_or_head("/updates", name="log_updates")
async def updates(
    request: HTMXRequest,
    viewer: NamedDependency[Viewer],
    db_session: NamedDependency[AsyncSession],
) -> Template | Response[Any]:
    params = request.query_params
    f = LogFilter.parse(params)
    window = LiveWindow.decode(params.get("window"))
    new = await fetch_new(db_session, viewer.workspace_id, f, window) if window else []
    versions = parse_versions(params.getall("live", []))
    changed = await fetch_changed(db_session, viewer.workspace_id, versions)
    if not new and not changed:
        # htmx swaps nothing on 204: the poller keeps its window and polls again.
        return Response(content=b"", status_code=204, headers=NO_STORE)
    if window is not None:
        window = window.advance([row.key for row in new])
    poll_items = f.items() + ([("window", window.encode())] if window else [])
    names = await workspace_names(db_session, viewer.workspace_id)
    return Template(
        "log/_updates.html",
        context={
            **row_context(names, viewer),
            "new_rows": new,
            "changed_rows": changed,
            "poll_url": url("/log/updates", poll_items),
        },
        headers=NO_STORE,
    )


def _state_options() -> list[tuple[str, str]]:
    plain = [(s.value, state_words(s)) for s in LegState if not s.is_skip]
    skips = [(s.value, state_words(s)) for s in LegState if s.is_skip]
    return [*plain, (SKIPPED, "Skipped (any reason)"), *skips]


def _refused_note(refused: str | None) -> str:
    if refused and refused.isdigit() and int(refused):
        return f" {refused} selected row(s) were not FAILED any more (or need a confirmation)."
    return ""
