"""Writing to the operational events timeline (alerts, pauses, refused webhooks)."""

from __future__ import annotations

import json
import logging
from datetime import timedelta
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import EventLevel, OperationalEvent

logger = logging.getLogger("oncereply.events")

_LOG_LEVELS = {
    EventLevel.INFO: logging.INFO,
    EventLevel.WARNING: logging.WARNING,
    EventLevel.ERROR: logging.ERROR,
}


async def record_event(
    session: AsyncSession,
    *,
    source: str,
    level: EventLevel,
    kind: str,
    message: str,
    workspace_id: int | None = None,
    account_id: int | None = None,
    details: dict[str, Any] | None = None,
) -> None:
    """Add an event to the caller's transaction and mirror it to the log."""
    session.add(
        OperationalEvent(
            source=source,
            level=level,
            kind=kind,
            message=message,
            workspace_id=workspace_id,
            account_id=account_id,
            details=details,
        )
    )
    logger.log(_LOG_LEVELS[level], "%s: %s", kind, message)


_RECORD_ONCE = text(
    """
INSERT INTO operational_events (workspace_id, account_id, source, level, kind, message, details)
SELECT CAST(:workspace_id AS bigint), CAST(:account_id AS bigint), CAST(:source AS varchar),
       CAST(:level AS varchar), CAST(:kind AS varchar), CAST(:message AS text),
       CAST(:details AS jsonb)
WHERE NOT EXISTS (
    SELECT 1 FROM operational_events
    WHERE workspace_id IS NOT DISTINCT FROM CAST(:workspace_id AS bigint)
      AND kind = CAST(:kind AS varchar)
      AND details ->> 'dedupe_key' = CAST(:dedupe_key AS text)
      AND created_at > now() - make_interval(secs => :within)
)
RETURNING id
"""
)


async def record_event_once(
    session: AsyncSession,
    *,
    dedupe_key: str,
    within: timedelta,
    source: str,
    level: EventLevel,
    kind: str,
    message: str,
    workspace_id: int | None = None,
    account_id: int | None = None,
    details: dict[str, Any] | None = None,
) -> bool:
    """`record_event`, unless the same `kind` and `dedupe_key` were recorded within `within`.

    For conditions a cron meets again on every run (a post another campaign already takes, a
    media that cannot be read): one notice per window instead of one a minute. The advisory
    lock (held until the caller's transaction ends) makes the check and the insert one step
    for concurrent writers of the same key. Returns whether a row was written; the log gets
    the message either way.
    """
    await session.execute(
        text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))"),
        {"key": f"operational-event:{kind}:{dedupe_key}"},
    )
    written = await session.scalar(
        _RECORD_ONCE,
        {
            "workspace_id": workspace_id,
            "account_id": account_id,
            "source": source,
            "level": level.value,
            "kind": kind,
            "message": message,
            "details": json.dumps({**(details or {}), "dedupe_key": dedupe_key}),
            "dedupe_key": dedupe_key,
            "within": within.total_seconds(),
        },
    )
    logger.log(_LOG_LEVELS[level], "%s: %s", kind, message)
    return written is not None
