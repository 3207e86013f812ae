"""`/log/export.csv`: the log as filtered, as a CSV download (`app.delivery_log.export`
streams it in batches, so a long download holds no transaction open)."""

from __future__ import annotations

from datetime import UTC, datetime

from litestar.di import NamedDependency
from litestar.plugins.htmx import HTMXRequest
from litestar.response import Stream
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.current import Viewer
from app.delivery_log.export import export_csv
from app.delivery_log.filters import LogFilter
from app.delivery_log.queries import workspace_names
from app.resources import Resources
from app.web.reads import get_or_head


@get_or_head("/export.csv", name="log_export")
async def export(
    request: HTMXRequest,
    viewer: NamedDependency[Viewer],
    resources: NamedDependency[Resources],
    db_session: NamedDependency[AsyncSession],
) -> Stream:
    f = LogFilter.parse(request.query_params)
    names = await workspace_names(db_session, viewer.workspace_id)
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M")
    # HEAD gets the download's headers alone: its rows would be read only to be dropped.
    rows = (
        ()
        if request.method == "HEAD"
        else export_csv(resources.engine, viewer.workspace_id, f, names)
    )
    return Stream(
        rows,
        media_type="text/csv; charset=utf-8",
        headers={
            "Content-Disposition": f'attachment; filename="oncereply-log-{stamp}.csv"',
            "Cache-Control": "no-store",
        },
    )
