"""The delivery log pages: the live table, a row's timeline, misses, CSV export, retry.

One URL serves the full page or, for htmx, only its results (`Vary: HX-Request`; a history
restore gets the full page), so filters and pages are ordinary links pushed to the history.

Live updates are htmx polling, every 3 s while the tab is visible (`GET /log/updates`): the
poller sends the live window of the first page and the `id:version` of every row it shows
that may still change; the answer prepends rows it did not show yet and replaces changed rows
in place (out-of-band swaps), so filters, the page and the scroll position stay where they
are. Polling rather than server-sent events: it needs no connection per open tab, no
notification channel from the worker, survives web restarts and proxies as is, and each poll
is two indexed reads (or a 204 when nothing changed).

Retry, bulk retry and "check the conversation again" run through `app.web.idempotency`: the
row change and the key's answer commit together, and the job is enqueued after that commit.
Owners and admins press them (`editors_only`); members see them disabled with the reason.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from litestar import Controller, Response, get, post
from litestar.di import NamedDependency
from litestar.exceptions import NotFoundException
from litestar.params import FromPath
from litestar.plugins.htmx import HTMXRequest, HTMXTemplate
from litestar.response import Stream, Template
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.current import Viewer, safe_next
from app.db.models import LegState, MissReason
from app.delivery.recovery.manual_retry import RetryStatus, mark_retry
from app.delivery.send.scheduling import enqueue_delivery
from app.delivery_log.actions import (
    enqueue_inbox_check,
    enqueue_retries,
    mark_bulk_retry,
    mark_inbox_check,
)
from app.delivery_log.evidence import describe_evidence
from app.delivery_log.export import export_csv
from app.delivery_log.filters import SKIPPED, Key, LiveWindow, LogFilter, MissFilter
from app.delivery_log.misses import MISS_REASONS, VERDICTS, fetch_misses
from app.delivery_log.paging import Paged
from app.delivery_log.queries import (
    LogRow,
    Names,
    Page,
    fetch_changed,
    fetch_new,
    fetch_page,
    fetch_row,
    fetch_timeline,
    parse_versions,
    state_sentence,
    workspace_names,
)
from app.operations.idempotency import Finished, Refused
from app.resources import Resources
from app.web.guards import editors_only
from app.web.htmx import wants_partial
from app.web.idempotency import as_response, idempotent, notice_response, redirect_to

_HEADERS = {"Cache-Control": "no-store", "Vary": "HX-Request"}
_NOTICES = {
    "retried": "Retry queued: the DM will be sent again in a moment.",
    "checking": "Looking in the conversation now; the result appears here in a few seconds.",
}
ROLE_NOTE = "Your role lets you see deliveries; owners and admins can retry them."


def _url(path: str, items: list[tuple[str, str]]) -> str:
    return f"{path}?{urlencode(items)}" if items else path


def _state_options() -> list[tuple[str, str]]:
    plain = [(s.value, s.value) for s in LegState if not s.is_skip]
    skips = [(s.value, s.value) for s in LegState if s.is_skip]
    return [*plain, (SKIPPED, "SKIPPED (any)"), *skips]


def _row_context(names: Names, viewer: Viewer) -> dict[str, Any]:
    return {
        "names": names,
        "can_change": viewer.can_change,
        "role_note": ROLE_NOTE,
        "today": datetime.now(UTC).date(),
    }


def _render_row(request: HTMXRequest, row: LogRow, names: Names, viewer: Viewer) -> str:
    engine = request.app.template_engine
    assert engine is not None  # noqa: S101 - create_app always configures templates
    template = engine.get_template("log/_row_only.html")
    html: str = template.render(row=row, csrf_input="", **_row_context(names, viewer))
    return html


class LogController(Controller):
    path = "/log"

    @get("/", name="log")
    async def index(
        self,
        request: HTMXRequest,
        viewer: NamedDependency[Viewer],
        db_session: NamedDependency[AsyncSession],
    ) -> Template:
        params = request.query_params
        f = LogFilter.parse(params)
        before, after = _cursors(request)
        page = await fetch_page(db_session, viewer.workspace_id, f, before=before, after=after)
        names = await workspace_names(db_session, viewer.workspace_id)
        items = f.items()
        poll_items = items + ([("window", page.live.encode())] if page.live else [])
        retried = params.get("retried")
        context = {
            **_row_context(names, viewer),
            **_pager("/log", items, page, before, after),
            "f": f,
            "page": page,
            "poll_url": _url("/log/updates", poll_items),
            "export_url": _url("/log/export.csv", items),
            "state_options": _state_options(),
            "notice": (
                f"{retried} deliveries queued for retry." + _refused_note(params.get("refused"))
                if retried and retried.isdigit()
                else None
            ),
        }
        return _page(request, context, full="log/index.html", partial="log/_results.html")

    @get("/updates", name="log_updates")
    async def updates(
        self,
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
            return Response(content=b"", status_code=204, headers={"Cache-Control": "no-store"})
        if window is not None:
            window = window.advance([row.key for row in new])
        poll_items = f.items() + ([("window", window.encode())] if window else [])
        names = await workspace_names(db_session, viewer.workspace_id)
        return Template(
            "log/_updates.html",
            context={
                **_row_context(names, viewer),
                "new_rows": new,
                "changed_rows": changed,
                "poll_url": _url("/log/updates", poll_items),
            },
            headers={"Cache-Control": "no-store"},
        )

    @get("/export.csv", name="log_export")
    async def export(
        self,
        request: HTMXRequest,
        viewer: NamedDependency[Viewer],
        resources: NamedDependency[Resources],
        db_session: NamedDependency[AsyncSession],
    ) -> Stream:
        f = LogFilter.parse(request.query_params)
        names = await workspace_names(db_session, viewer.workspace_id)
        stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M")
        return Stream(
            export_csv(resources.engine, viewer.workspace_id, f, names),
            media_type="text/csv; charset=utf-8",
            headers={
                "Content-Disposition": f'attachment; filename="oncereply-log-{stamp}.csv"',
                "Cache-Control": "no-store",
            },
        )

    @get("/misses", name="log_misses")
    async def misses(
        self,
        request: HTMXRequest,
        viewer: NamedDependency[Viewer],
        db_session: NamedDependency[AsyncSession],
    ) -> Template:
        f = MissFilter.parse(request.query_params)
        before, after = _cursors(request)
        page = await fetch_misses(db_session, viewer.workspace_id, f, before=before, after=after)
        context = {
            **_pager("/log/misses", f.items(), page, before, after),
            "f": f,
            "page": page,
            "names": await workspace_names(db_session, viewer.workspace_id),
            "today": datetime.now(UTC).date(),
            "reasons": [(r.value, MISS_REASONS.get(r, r.value)) for r in MissReason],
            "verdicts": VERDICTS,
        }
        return _page(request, context, full="log/misses.html", partial="log/_misses_results.html")

    @get("/{dm_log_id:int}", name="log_entry")
    async def entry(
        self,
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
                return Response(content=b"", status_code=204, headers={"Cache-Control": "no-store"})
        timeline = await fetch_timeline(db_session, viewer.workspace_id, dm_log_id)
        if timeline is None:
            raise NotFoundException("No such delivery in this workspace.")
        names = await workspace_names(db_session, viewer.workspace_id)
        notice = _NOTICES.get(request.query_params.get("notice") or "")
        context = {
            **_row_context(names, viewer),
            "t": timeline,
            "row": timeline.row,
            "log": timeline.log,
            "sentence": state_sentence(timeline),
            "evidence": describe_evidence(timeline.log.pr_evidence),
            "verdicts": VERDICTS,
            "miss_reasons": MISS_REASONS,
            "notice": notice,
        }
        template = "log/_timeline.html" if partial else "log/entry.html"
        return Template(template, context=context, headers=_HEADERS)

    # --- buttons -------------------------------------------------------------------------

    @post("/{dm_log_id:int}/retry", name="log_retry", status_code=200, guards=[editors_only])
    async def retry(
        self,
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
                return Refused(as_response(request, {"location": f"/log/{dm_log_id}#retry-panel"}))
            if result.status is RetryStatus.NOT_RETRYABLE:
                return Refused(notice_response(request, 409, "Not retried", result.message))
            due.append(result.due)
            if names is not None:
                row = await fetch_row(session, viewer.workspace_id, dm_log_id)
                assert row is not None  # noqa: S101 - just updated in this transaction
                return Finished({"status": 200, "html": _render_row(request, row, names, viewer)})
            return redirect_to(f"/log/{dm_log_id}?notice=retried")

        async def enqueue() -> None:
            await enqueue_delivery(resources.queue, dm_log_id, due[0])

        return await idempotent(
            request, resources, viewer, scope="delivery.retry", action=action, after_commit=enqueue
        )

    @post("/retry", name="log_bulk_retry", status_code=200, guards=[editors_only])
    async def bulk_retry(
        self,
        request: HTMXRequest,
        viewer: NamedDependency[Viewer],
        resources: NamedDependency[Resources],
    ) -> Response[Any]:
        form = await request.form()
        ids = [int(v) for v in form.getall("ids", []) if isinstance(v, str) and v.isdigit()]
        back = safe_next(str(form.get("back") or "/log"))
        if not ids:
            return notice_response(
                request, 422, "Nothing selected", "Tick the failed rows to retry first."
            )
        queued: dict[int, datetime | None] = {}

        async def action(session: AsyncSession) -> Finished | Refused[Response[Any]]:
            result = await mark_bulk_retry(
                session, workspace_id=viewer.workspace_id, dm_log_ids=ids
            )
            queued.update(result.queued)
            joiner = "&" if "?" in back else "?"
            return redirect_to(
                f"{back}{joiner}retried={len(result.queued)}&refused={result.refused}"
            )

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
        self,
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
            return Refused(as_response(request, {"location": f"/log/{dm_log_id}"}))

        async def enqueue() -> None:
            await enqueue_inbox_check(resources.queue, dm_log_id)

        return await idempotent(
            request, resources, viewer, scope="delivery.check", action=action, after_commit=enqueue
        )


def _cursors(request: HTMXRequest) -> tuple[Key | None, Key | None]:
    params = request.query_params
    return Key.decode(params.get("before")), Key.decode(params.get("after"))


def _pager(
    path: str,
    items: list[tuple[str, str]],
    page: Page | Paged[Any],
    before: Key | None,
    after: Key | None,
) -> dict[str, str | None]:
    """The page's own URL and its pager links, filters kept."""
    if page.first:
        cursor: list[tuple[str, str]] = []
    elif before is not None:
        cursor = [("before", before.encode())]
    else:
        cursor = [("after", after.encode())] if after is not None else []
    return {
        "here": _url(path, items + cursor),
        "first_url": _url(path, items),
        "older_url": _url(path, [*items, ("before", page.older.encode())]) if page.older else None,
        "newer_url": _url(path, [*items, ("after", page.newer.encode())]) if page.newer else None,
    }


def _page(request: HTMXRequest, context: dict[str, Any], *, full: str, partial: str) -> Template:
    """The full page, or for htmx only its results, with the URL of what is shown pushed."""
    if wants_partial(request):
        return HTMXTemplate(
            template_name=partial, context=context, headers=_HEADERS, push_url=str(context["here"])
        )
    return Template(full, context=context, headers=_HEADERS)


def _refused_note(refused: str | None) -> str:
    if refused and refused.isdigit() and int(refused):
        return f" {refused} selected row(s) were not FAILED any more (or need a confirmation)."
    return ""
