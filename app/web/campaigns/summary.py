"""`/campaigns/summary.csv`: one line per campaign with its deliveries and link taps
(`app.delivery_log.campaign_summary`), for a spreadsheet or a client."""

from __future__ import annotations

from datetime import UTC, datetime

from litestar.di import NamedDependency
from litestar.response import Response
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.current import Viewer
from app.delivery_log.campaign_summary import summary_csv
from app.web.reads import get_or_head


@get_or_head("/summary.csv", name="campaign_summary_export")
async def summary_export(
    viewer: NamedDependency[Viewer], db_session: NamedDependency[AsyncSession]
) -> Response[bytes]:
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M")
    return Response(
        await summary_csv(db_session, viewer.workspace_id),
        media_type="text/csv; charset=utf-8",
        headers={
            "Content-Disposition": f'attachment; filename="oncereply-campaigns-{stamp}.csv"',
            "Cache-Control": "no-store",
        },
    )
