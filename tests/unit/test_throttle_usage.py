"""Reading Meta's usage headers into an account's pace (pure parts of `throttle`)."""

from __future__ import annotations

from app.delivery.send.throttle import MIN_SHARE, SLOW_FROM, share_for, usage_percent
from app.instagram.graph import Usage


def test_the_highest_share_of_any_budget_counts() -> None:
    usage = Usage(
        app={"call_count": 12, "total_time": 3, "total_cputime": 1},
        business={
            "1784": [
                {"type": "instagram", "call_count": 40, "total_time": 81, "total_cputime": 5},
                {"type": "messenger", "call_count": "not a number"},
            ]
        },
    )
    assert usage_percent(usage) == 81
    assert usage_percent(Usage()) == 0


def test_the_pace_drops_with_the_headroom_and_never_below_the_least_share() -> None:
    assert share_for(SLOW_FROM - 1) == 1.0
    assert share_for(SLOW_FROM) == 1.0
    assert share_for(90) < share_for(80) < 1.0
    assert share_for(100) == MIN_SHARE
    assert share_for(250) == MIN_SHARE
