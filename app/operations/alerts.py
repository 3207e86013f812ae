"""Operational events that outsiders or a misbehaving sender could trigger in bulk, throttled.

Anyone on the internet can POST a badly signed webhook; if every refusal wrote a row, an
attacker could flood the events table. Each kind gets at most `per_minute` rows per minute,
counted with one atomic Redis `INCR` per refusal (the log still gets every one). Without
Redis the count cannot be kept, so only the log gets them.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.db.models import EventLevel
from app.operations.events import record_event

logger = logging.getLogger("oncereply.alerts")

_KEY_PREFIX = "oncereply:alert-throttle:"


async def allowed(redis: Redis, kind: str, *, per_minute: int) -> tuple[bool, int]:
    """(may record, how many of this kind so far this minute); (False, 0) without Redis."""
    key = f"{_KEY_PREFIX}{kind}:{int(time.time() // 60)}"
    try:
        async with redis.pipeline(transaction=True) as pipe:
            pipe.incr(key)
            pipe.expire(key, 120)
            count, _ = await pipe.execute()
    except Exception as exc:  # noqa: BLE001 - without Redis we only log
        logger.warning("alert throttle unavailable (%s); %s logged only", exc, kind)
        return False, 0
    return int(count) <= per_minute, int(count)


async def record_throttled(
    sessionmaker: async_sessionmaker[AsyncSession],
    redis: Redis,
    *,
    kind: str,
    message: str,
    source: str = "webhook",
    level: EventLevel = EventLevel.WARNING,
    details: dict[str, Any] | None = None,
    per_minute: int = 5,
) -> bool:
    """Record an operational event unless this kind is over its per-minute budget."""
    ok, count = await allowed(redis, kind, per_minute=per_minute)
    if not ok:
        logger.warning("%s: %s (not recorded: %d this minute)", kind, message, count)
        return False
    if count == per_minute:
        message += f" (further ones this minute are only logged; at most {per_minute} recorded)"
    try:
        async with sessionmaker() as session, session.begin():
            await record_event(
                session, source=source, level=level, kind=kind, message=message, details=details
            )
    except Exception as exc:  # noqa: BLE001 - a refusal must not become a 500
        logger.warning("%s: %s (could not be recorded: %s)", kind, message, exc)
        return False
    return True
