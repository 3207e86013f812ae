"""The workspace's monthly DM quota: one counter row per (workspace, UTC month).

A reservation is a conditional upsert: it adds one only while the counter is below
`workspaces.monthly_dm_quota`, so two workers can never both take the last DM of the month. The
private-reply claim embeds the same upsert in its single statement (`RESERVE_UPSERT`); a
definite rejection gives the reservation back in the month it was taken, an ambiguous one keeps
it.

Only a workspace with a cap (`monthly_dm_quota` set) is counted. The counter is one row that
every claim of the workspace would lock until its commit: counting an uncapped workspace too
made all of its claims wait on each other, one WAL flush after another, for a figure nothing
reads. A cap set during a month therefore counts the DMs claimed from then on.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

# `{source}` is a SELECT yielding (workspace_id, month, 1) for the workspaces that may still
# send; the upsert then adds one unless the month's counter has reached the cap.
RESERVE_UPSERT = """
INSERT INTO usage_counters AS u (workspace_id, month, dms_reserved)
{source}
ON CONFLICT (workspace_id, month) DO UPDATE SET dms_reserved = u.dms_reserved + 1
WHERE u.dms_reserved < COALESCE(
    (SELECT w.monthly_dm_quota FROM workspaces w WHERE w.id = u.workspace_id),
    9223372036854775807)
RETURNING u.month
"""

_RESERVE = text(
    RESERVE_UPSERT.format(
        source="SELECT w.id, CAST(:month AS date), 1 FROM workspaces w "
        "WHERE w.id = :workspace_id AND w.monthly_dm_quota >= 1"
    )
)
_CAPPED = text("SELECT monthly_dm_quota IS NOT NULL FROM workspaces WHERE id = :workspace_id")
_RELEASE = text(
    "UPDATE usage_counters SET dms_reserved = dms_reserved - 1 "
    "WHERE workspace_id = :workspace_id AND month = :month AND dms_reserved > 0"
)
_USAGE = text(
    "SELECT w.monthly_dm_quota, COALESCE(u.dms_reserved, 0) AS dms_reserved FROM workspaces w "
    "LEFT JOIN usage_counters u ON u.workspace_id = w.id AND u.month = :month "
    "WHERE w.id = :workspace_id"
)


@dataclass(frozen=True, slots=True)
class Usage:
    reserved: int
    quota: int | None  # None: no cap

    @property
    def remaining(self) -> int | None:
        return None if self.quota is None else max(0, self.quota - self.reserved)


def usage_month(now: datetime | None = None) -> date:
    """The first day of the UTC month `now` falls in: the counter's key."""
    moment = (now or datetime.now(UTC)).astimezone(UTC)
    return date(moment.year, moment.month, 1)


async def reserve(conn: AsyncConnection, workspace_id: int, month: date | None = None) -> bool:
    """Take one DM of the month's quota; False when it is used up. A workspace without a cap
    is not counted, and always has one to take."""
    params = {"workspace_id": workspace_id, "month": month or usage_month()}
    if (await conn.execute(_RESERVE, params)).first() is not None:
        return True
    return (await conn.execute(_CAPPED, {"workspace_id": workspace_id})).scalar() is False


async def release(conn: AsyncConnection, workspace_id: int, month: date) -> None:
    """Give back a reservation taken in `month` (never below zero)."""
    await conn.execute(_RELEASE, {"workspace_id": workspace_id, "month": month})


async def usage(conn: AsyncConnection, workspace_id: int, month: date | None = None) -> Usage:
    row = (
        await conn.execute(_USAGE, {"workspace_id": workspace_id, "month": month or usage_month()})
    ).first()
    if row is None:
        return Usage(0, None)
    quota = row.monthly_dm_quota
    return Usage(reserved=int(row.dms_reserved), quota=None if quota is None else int(quota))
