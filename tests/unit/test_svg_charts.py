"""The SVG charts: well-formed, named and described for assistive technology, scaled to their
numbers, escaped, and free of what the CSP forbids; the chart buckets in a workspace's zone."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from app.delivery_log.charts import Span, buckets_for, parse_span
from app.web.svg_charts import Bar, Series, funnel_bars, nice_ceiling, stacked_bars

NS = "{http://www.w3.org/2000/svg}"


def parse(markup: str) -> ET.Element:
    return ET.fromstring(str(markup))  # noqa: S314 - our own output, parsed to check it


def test_stacked_bars_are_an_accessible_scaled_image() -> None:
    svg = parse(
        stacked_bars(
            chart_id="c",
            title="DMs <over> time",
            desc="3 & more",
            labels=["a", "b", "c"],
            series=[Series("sent", "sent", [2, 0, 4]), Series("not sent", "failed", [2, 0, 0])],
            label_every=2,
        )
    )
    assert svg.get("role") == "img"
    assert svg.get("aria-labelledby") == "c-title c-desc"
    assert svg.find(f"{NS}title").text == "DMs <over> time"  # escaped going in, read back
    assert svg.find(f"{NS}desc").text == "3 & more"
    rects = svg.findall(f".//{NS}rect")
    heights = {(r.get("class"), r.find(f"{NS}title").text): float(r.get("height")) for r in rects}
    # The axis tops at 5 (4 rounded up to 1-2-5): a 4 is 4/5 of the plot, each 2 is 2/5.
    plot = 180 - 8 - 20
    assert heights == {
        ("bar-sent", "a: 2 sent"): pytest.approx(plot * 2 / 5, abs=0.1),
        ("bar-failed", "a: 2 not sent"): pytest.approx(plot * 2 / 5, abs=0.1),
        ("bar-sent", "c: 4 sent"): pytest.approx(plot * 4 / 5, abs=0.1),
    }
    # Labels under every second bar.
    axis = [t.text for t in svg.findall(f"{NS}text")]
    assert "a" in axis
    assert "c" in axis
    assert "b" not in axis
    assert all(e.get("style") is None for e in svg.iter())


def test_an_empty_chart_still_draws() -> None:
    svg = parse(
        stacked_bars(
            chart_id="e",
            title="t",
            desc="d",
            labels=["x"] * 24,
            series=[Series("taps", "taps", [0] * 24)],
            label_every=6,
        )
    )
    assert svg.findall(f".//{NS}rect") == []


def test_series_must_match_the_labels() -> None:
    with pytest.raises(ValueError, match="one value per label"):
        stacked_bars(
            chart_id="x",
            title="t",
            desc="d",
            labels=["a"],
            series=[Series("s", "s", [1, 2])],
            label_every=1,
        )


def test_funnel_bars_are_as_long_as_their_share_of_the_first() -> None:
    svg = parse(
        funnel_bars(
            chart_id="f",
            title="Funnel",
            desc="d",
            bars=[Bar("Seen", 8, "comments"), Bar("Tapped <a> link", 2, "people (25.0%)")],
        )
    )
    steps = svg.findall(f"{NS}g")
    widths = [float(g.findall(f"{NS}rect")[1].get("width")) for g in steps]
    assert widths == [398.0, pytest.approx(398 / 4, abs=0.1)]
    assert steps[1].find(f"{NS}text").text == "Tapped <a> link: 2 people (25.0%)"


@pytest.mark.parametrize(
    ("value", "top"), [(0, 1), (1, 1), (3, 5), (7, 10), (10, 10), (11, 20), (260, 500)]
)
def test_nice_ceiling(value: int, top: int) -> None:
    assert nice_ceiling(value) == top


def test_buckets_are_the_workspace_s_hours_and_days() -> None:
    now = datetime(2026, 12, 2, 8, 40, tzinfo=UTC)
    kolkata = ZoneInfo("Asia/Kolkata")  # UTC+5:30: its hours start at :30 UTC
    hours = buckets_for(Span.HOURS, kolkata, now)
    assert len(hours) == 24
    # 14:10 there: its 14:00 hour is the last, 23 hours before it the first.
    assert (hours[0].isoformat(), hours[-1].isoformat()) == (
        "2026-12-01T15:00:00",
        "2026-12-02T14:00:00",
    )
    days = buckets_for(Span.DAYS, ZoneInfo("Pacific/Auckland"), now)
    assert (days[0].isoformat(), days[-1].isoformat()) == (
        "2026-11-03T00:00:00",
        "2026-12-02T00:00:00",
    )


def test_a_fall_back_night_has_one_bucket_per_wall_clock_hour() -> None:
    # 2026-11-01 in New York: 01:00-02:00 happens twice.
    hours = buckets_for(
        Span.HOURS, ZoneInfo("America/New_York"), datetime(2026, 11, 1, 20, tzinfo=UTC)
    )
    assert len(hours) == len(set(hours)) == 23


def test_an_unknown_range_is_the_default() -> None:
    assert parse_span("24h") is Span.HOURS
    assert parse_span("1y") is Span.DAYS
    assert parse_span(None) is Span.DAYS
