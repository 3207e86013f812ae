"""Writing to the operational events timeline (alerts, pauses, refused webhooks)."""

from __future__ import annotations

import logging
from typing import Any

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
