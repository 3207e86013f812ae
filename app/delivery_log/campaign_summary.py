"""The per-campaign summary as CSV: one line per campaign of the workspace, what it did.

Counts come from the kept delivery totals (`delivery_totals`) and tap counts
(`link_click_hours`), each grouped per campaign (no per-delivery or per-tap work); a person
who tapped several times, or several buttons, counts once in `people_tapped`. Cells are made
safe the way the log's export makes them (`safe_cell`).
"""

from __future__ import annotations

import csv
import io

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.delivery_log.export import BOM, safe_cell
from app.delivery_log.kept_counts import DELIVERIES, SKIPPED

HEADER = [
    "campaign",
    "status",
    "account",
    "deliveries",
    "dms_sent",
    "dms_failed",
    "dms_unconfirmed",
    "dms_skipped",
    "link_dms_sent",
    "people_tapped",
    "taps",
    "tap_rate_percent",
    "link_previews",
]

SUMMARY = text(
    f"""
WITH deliveries AS (
    SELECT campaign_id,
           sum({DELIVERIES}) AS deliveries,
           sum(sent) AS sent,
           sum(failed) AS failed,
           sum(unconfirmed) AS unconfirmed,
           sum({SKIPPED}) AS skipped,
           sum(link_sent) AS link_sent
    FROM delivery_totals WHERE workspace_id = :workspace_id GROUP BY campaign_id
), taps AS (
    SELECT campaign_id, sum(taps) AS taps, sum(people) AS people, sum(previews) AS previews
    FROM link_click_hours WHERE workspace_id = :workspace_id GROUP BY campaign_id
)
SELECT c.name, c.status, a.username,
       COALESCE(d.deliveries, 0), COALESCE(d.sent, 0), COALESCE(d.failed, 0),
       COALESCE(d.unconfirmed, 0), COALESCE(d.skipped, 0), COALESCE(d.link_sent, 0),
       COALESCE(t.people, 0), COALESCE(t.taps, 0),
       CASE WHEN COALESCE(d.link_sent, 0) > 0
            THEN round(100.0 * COALESCE(t.people, 0) / d.link_sent, 1) END,
       COALESCE(t.previews, 0)
FROM campaigns c
JOIN instagram_accounts a ON a.id = c.account_id
LEFT JOIN deliveries d ON d.campaign_id = c.id
LEFT JOIN taps t ON t.campaign_id = c.id
WHERE c.workspace_id = :workspace_id
ORDER BY c.created_at, c.id
"""  # noqa: S608 - composed from the LegState enum's column names
)


async def summary_csv(session: AsyncSession, workspace_id: int) -> bytes:
    rows = (await session.execute(SUMMARY, {"workspace_id": workspace_id})).all()
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(HEADER)
    for row in rows:
        writer.writerow([safe_cell(value) for value in row])
    return BOM.encode("utf-8") + buffer.getvalue().encode("utf-8")
