"""A workspace's time zone: the IANA name its dashboard shows times in, and its day.

Times are stored in UTC; the zone only changes how they are shown (every dashboard time goes
through the `local_time` filter of `app.web.templating`, with the UTC time on hover) and where
the overview's "today" begins. A workspace made before zones existed, or by a browser that sent
none, is in UTC.
"""

from __future__ import annotations

from datetime import UTC, datetime, time, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Workspace

DEFAULT_ZONE = "UTC"
MAX_ZONE_LENGTH = 64
# The IANA names: what the form suggests and all a workspace may choose. ZoneInfo also opens
# the tz database's other files (`right/…` with leap seconds, `posix/…`), which PostgreSQL
# does not know: its counts (`zone_or_utc()` in SQL) would be kept in UTC while the pages
# showed that zone.
ZONE_NAMES: tuple[str, ...] = tuple(sorted(available_timezones()))
_KNOWN_ZONES = frozenset(ZONE_NAMES)


class InvalidTimeZoneError(ValueError):
    """A name that is not an IANA time zone; its text is the field's error."""


def parse_zone(name: str) -> str:
    """The IANA zone `name` (trimmed), or `InvalidTimeZoneError` saying what is wrong."""
    name = name.strip()
    if not name:
        raise InvalidTimeZoneError("Choose a time zone, such as Europe/Paris or UTC.")
    if len(name) > MAX_ZONE_LENGTH or "\x00" in name:
        raise InvalidTimeZoneError("That is not a time zone we know, such as Europe/Paris or UTC.")
    if name not in _KNOWN_ZONES:
        raise InvalidTimeZoneError(
            f"“{name}” is not a time zone we know; use a name such as Europe/Paris or UTC."
        )
    return name


def zone_or_utc(name: str | None) -> tzinfo:
    """The zone to draw times in; UTC for a missing or unknown name (never an error page)."""
    if not name:
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return UTC


def browser_zone_or_default(name: str | None) -> str:
    """The zone a sign-up form's browser reported, when it is one; UTC otherwise."""
    try:
        return parse_zone(name or "")
    except InvalidTimeZoneError:
        return DEFAULT_ZONE


def start_of_day(zone: tzinfo, now: datetime | None = None) -> datetime:
    """Midnight of the workspace's current day, as an aware datetime in `zone`."""
    local = (now or datetime.now(UTC)).astimezone(zone)
    return datetime.combine(local.date(), time.min, zone)


async def set_time_zone(session: AsyncSession, workspace_id: int, name: str) -> str:
    """Store a validated zone for the workspace (in the caller's transaction). A new zone
    marks the people kept per day of taps to be counted again in it (a trigger on
    `workspaces`, migration 0036): the caller enqueues `JobName.RECOUNT_CLICK_DAYS` after its
    commit (`app.clicks.day_recount`)."""
    zone = parse_zone(name)
    await session.execute(
        update(Workspace).where(Workspace.id == workspace_id).values(time_zone=zone)
    )
    return zone
