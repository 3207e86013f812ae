"""The sandbox's controllable clock.

Every rule that depends on time (token expiry, the 7-day private-reply window, the 24-hour
messaging window, the hourly private-reply limit, follow lag) reads this clock, so a test can
jump days ahead with one admin call instead of waiting.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime


class Clock:
    """Real time plus an offset that only ever grows."""

    def __init__(self) -> None:
        self._offset = 0.0

    @property
    def offset(self) -> float:
        return self._offset

    def now(self) -> float:
        return time.time() + self._offset

    def advance(self, seconds: float) -> None:
        # Going backwards would let a used private reply or an expired token become valid
        # again, which Meta never does; refuse it rather than model an impossible world.
        if seconds < 0:
            raise ValueError("the clock only moves forward")
        self._offset += seconds

    def reset(self) -> None:
        self._offset = 0.0


def graph_timestamp(epoch: float) -> str:
    """Format a time the way Graph API ``timestamp`` fields do: ``2025-06-01T12:00:00+0000``."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%S+0000")


def session_time(epoch: float) -> str:
    """Format a time like the dates in Meta's "Session has expired on ..." messages."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%A, %d-%b-%y %H:%M:%S UTC")
