"""The one way the dashboard shows a time: in the workspace's zone, UTC on hover."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from app.web.templating import local_time
from app.workspaces.time_zone import (
    InvalidTimeZoneError,
    browser_zone_or_default,
    parse_zone,
    start_of_day,
    zone_or_utc,
)

NOW = datetime(2026, 12, 2, 6, 30, tzinfo=UTC)
TOKYO = ZoneInfo("Asia/Tokyo")


def test_a_utc_workspace_sees_utc_with_the_utc_title() -> None:
    shown = local_time(NOW - timedelta(hours=1), UTC, now=NOW)
    assert shown == (
        '<time datetime="2026-12-02T05:30:00+00:00" title="2026-12-02 05:30:00 UTC">05:30:00</time>'
    )


def test_another_zone_shifts_the_time_and_the_date() -> None:
    # 16:00 UTC on Dec 1 is 01:00 on Dec 2 in Tokyo: today there, so no date in front.
    shown = local_time(datetime(2026, 12, 1, 16, tzinfo=UTC), TOKYO, now=NOW)
    assert ">01:00:00</time>" in shown
    assert 'title="2026-12-02 01:00:00 Asia/Tokyo · 2026-12-01 16:00:00 UTC"' in shown
    earlier = local_time(datetime(2026, 12, 1, 14, tzinfo=UTC), TOKYO, now=NOW)
    assert ">Dec 01 23:00:00</time>" in earlier
    assert ">02 Dec 2026</time>" in local_time(
        datetime(2026, 12, 1, 16, tzinfo=UTC), TOKYO, "%d %b %Y", now=NOW
    )


def test_relative_and_caller_words_keep_the_hover() -> None:
    later = local_time(NOW + timedelta(days=6, hours=1), UTC, relative=True, now=NOW)
    assert later.endswith(">in 6 d</time>")
    assert ">expires in 3 h</time>" in local_time(NOW, UTC, text="expires in 3 h")
    assert local_time(None, UTC) == "—"


def test_zone_names_are_validated() -> None:
    assert parse_zone(" Europe/Paris ") == "Europe/Paris"
    assert parse_zone("Etc/GMT+12") == "Etc/GMT+12"
    # Files of the tz database ZoneInfo opens but PostgreSQL does not know as zones.
    bad_names = ("right/Europe/Paris", "posix/Europe/Paris", "zone.tab", "posixrules")
    for bad in ("Mars/Olympus", "", "../../etc/passwd", "Europe/Paris\x00", "x" * 65, *bad_names):
        with pytest.raises(InvalidTimeZoneError):
            parse_zone(bad)
    assert browser_zone_or_default("Nope/Nope") == "UTC"
    assert browser_zone_or_default(None) == "UTC"
    assert zone_or_utc("Nope/Nope") is UTC


def test_the_day_starts_at_the_zone_midnight() -> None:
    assert start_of_day(TOKYO, NOW) == datetime(2026, 12, 1, 15, tzinfo=UTC)
    assert start_of_day(UTC, NOW) == datetime(2026, 12, 2, tzinfo=UTC)
