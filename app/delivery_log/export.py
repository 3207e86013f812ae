"""CSV export of the filtered delivery log, streamed in keyset batches.

Each row ends with its link taps: how many, and the first one's time. The export walks the
same filtered query as the log, newest first, `EXPORT_BATCH` rows per
read; each read is its own short statement on a pooled connection, so a slow download never
holds a transaction (or all rows) open. The output is RFC 4180 CSV in UTF-8 with a byte
order mark (spreadsheets then read non-ASCII names right).

Cells a spreadsheet would run as a formula (starting with `=`, `+`, `-`, `@`, a tab or a
carriage return) get a leading apostrophe: a fan's comment is data, never a formula.
"""

from __future__ import annotations

import csv
import io
from collections.abc import AsyncIterator, Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.models import DmLog, LinkClick, LinkVisit
from app.delivery_log.filters import Key, LogFilter
from app.delivery_log.queries import NEWEST_FIRST, Names, log_conditions, older_than

EXPORT_BATCH = 1000
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
BOM = "\ufeff"

HEADER = [
    "created_at",
    "id",
    "account",
    "campaign",
    "trigger",
    "commenter",
    "commenter_id",
    "comment_text",
    "matched_keyword",
    "dm_state",
    "dm_attempts",
    "dm_sent_at",
    "dm_error_code",
    "dm_error_subcode",
    "dm_error",
    "public_reply_state",
    "public_reply_sent_at",
    "public_reply_error",
    "reply_deadline",
    "updated_at",
    "link_taps",
    "first_tap_at",
]
_COLUMNS = (
    DmLog.created_at,
    DmLog.id,
    DmLog.account_id,
    DmLog.campaign_id,
    DmLog.trigger_kind,
    DmLog.recipient_username,
    DmLog.recipient_id,
    DmLog.trigger_text,
    DmLog.matched_keyword,
    DmLog.pr_state,
    DmLog.pr_attempts,
    DmLog.pr_sent_at,
    DmLog.pr_error_code,
    DmLog.pr_error_subcode,
    DmLog.pr_error_message,
    DmLog.pub_state,
    DmLog.pub_sent_at,
    DmLog.pub_error_message,
    DmLog.deadline_at,
    DmLog.updated_at,
    # A person's taps on this delivery's links (previews not counted), by the index on dm_log_id.
    select(func.count())
    .where(LinkClick.dm_log_id == DmLog.id, LinkClick.visit == LinkVisit.CLICK)
    .correlate(DmLog)
    .scalar_subquery()
    .label("link_taps"),
    select(func.min(LinkClick.clicked_at))
    .where(LinkClick.dm_log_id == DmLog.id, LinkClick.visit == LinkVisit.CLICK)
    .correlate(DmLog)
    .scalar_subquery()
    .label("first_tap_at"),
)


def safe_cell(value: Any) -> Any:
    """A value as a CSV cell that no spreadsheet evaluates."""
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def _lines(rows: Iterable[list[Any]]) -> bytes:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    for row in rows:
        writer.writerow([safe_cell(value) for value in row])
    return buffer.getvalue().encode("utf-8")


async def export_csv(
    engine: AsyncEngine, workspace_id: int, f: LogFilter, names: Names
) -> AsyncIterator[bytes]:
    """The filtered log as CSV chunks: the header, then one chunk per batch."""
    yield BOM.encode("utf-8") + _lines([HEADER])
    query = select(*_COLUMNS).where(*log_conditions(workspace_id, f))
    cursor: Key | None = None
    while True:
        batch = query.where(older_than(cursor)) if cursor else query
        async with engine.connect() as conn:
            rows = (await conn.execute(batch.order_by(*NEWEST_FIRST).limit(EXPORT_BATCH))).all()
        if not rows:
            return
        yield _lines(
            [
                [
                    row.created_at,
                    row.id,
                    names.accounts.get(row.account_id, ""),
                    names.campaigns.get(row.campaign_id, "") if row.campaign_id else "",
                    *row[4:],
                ]
                for row in rows
            ]
        )
        if len(rows) < EXPORT_BATCH:
            return
        cursor = Key.of(rows[-1].created_at, rows[-1].id)
