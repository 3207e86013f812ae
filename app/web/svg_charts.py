"""Charts as server-drawn SVG (pure): stacked bars over time, and a funnel's steps as bars.

No script and no style attribute (the CSP forbids both): each shape carries a class that
`static/app.css` colours. The drawing scales with its box (`viewBox`, the CSS makes it 100%
wide), so it reads on a 390 px phone. Each chart is an image to assistive technology
(`role="img"`) named by its `<title>` and described by its `<desc>`; the page puts the numbers
beside it as a table too. Every text that goes in is escaped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup

from app.delivery_log.charts import Span, Timeline
from app.delivery_log.funnel import Funnel

WIDTH = 400
HEIGHT = 180
_LEFT = 34  # room for the y-axis numbers
_RIGHT = 6
_TOP = 8
_BOTTOM = 20  # room for the x-axis labels


@dataclass(frozen=True, slots=True)
class Series:
    name: str
    css: str  # the class its bars get: `bar-<css>`
    values: Sequence[int]


def nice_ceiling(value: int) -> int:
    """The axis top: `value` rounded up to 1, 2 or 5 times a power of ten (at least 1)."""
    if value <= 1:
        return 1
    power = int(10 ** math.floor(math.log10(value)))
    for step in (1, 2, 5, 10):
        if value <= step * power:
            return step * power
    return 10 * power


def _open(chart_id: str, title: str, desc: str, height: int) -> Markup:
    return Markup(
        '<svg class="chart" id="{id}" viewBox="0 0 {w} {h}" role="img" '
        'aria-labelledby="{id}-title {id}-desc" xmlns="http://www.w3.org/2000/svg">'
        '<title id="{id}-title">{title}</title><desc id="{id}-desc">{desc}</desc>'
    ).format(id=chart_id, w=WIDTH, h=height, title=title, desc=desc)


def _num(value: float) -> str:
    return f"{value:.1f}".removesuffix(".0")


def stacked_bars(
    *,
    chart_id: str,
    title: str,
    desc: str,
    labels: Sequence[str],
    series: Sequence[Series],
    label_every: int,
) -> Markup:
    """One bar per label, its series stacked bottom up in the order given."""
    count = len(labels)
    if any(len(s.values) != count for s in series):
        raise ValueError("every series needs one value per label")
    totals = [sum(s.values[i] for s in series) for i in range(count)]
    top = nice_ceiling(max(totals, default=0))
    plot_w = WIDTH - _LEFT - _RIGHT
    plot_h = HEIGHT - _TOP - _BOTTOM
    base = _TOP + plot_h
    slot = plot_w / max(count, 1)
    bar_w = max(slot * 0.7, 1.0)
    parts = [_open(chart_id, title, desc, HEIGHT)]
    for fraction in (0.0, 0.5, 1.0):
        y = base - plot_h * fraction
        value = top * fraction
        if fraction == 0.5 and value != int(value):
            continue
        parts.append(
            Markup(
                '<line class="chart-grid" x1="{x1}" y1="{y}" x2="{x2}" y2="{y}"/>'
                '<text class="chart-axis" x="{tx}" y="{ty}" text-anchor="end">{v}</text>'
            ).format(
                x1=_LEFT, x2=WIDTH - _RIGHT, y=_num(y), tx=_LEFT - 4, ty=_num(y + 4), v=int(value)
            )
        )
    for i, label in enumerate(labels):
        x = _LEFT + slot * i + (slot - bar_w) / 2
        y = base
        parts.append(Markup('<g class="chart-bar" data-bucket="{}">').format(i))
        for s in series:
            value = s.values[i]
            if value <= 0:
                continue
            h = plot_h * value / top
            y -= h
            parts.append(
                Markup(
                    '<rect class="bar-{css}" x="{x}" y="{y}" width="{w}" height="{h}">'
                    "<title>{label}: {value} {name}</title></rect>"
                ).format(
                    css=s.css,
                    x=_num(x),
                    y=_num(y),
                    w=_num(bar_w),
                    h=_num(h),
                    label=label,
                    value=value,
                    name=s.name,
                )
            )
        parts.append(Markup("</g>"))
        if i % label_every == 0:
            parts.append(
                Markup(
                    '<text class="chart-axis" x="{x}" y="{y}" text-anchor="middle">{t}</text>'
                ).format(x=_num(x + bar_w / 2), y=HEIGHT - 5, t=label)
            )
    parts.append(Markup("</svg>"))
    return Markup("").join(parts)


@dataclass(frozen=True, slots=True)
class Bar:
    label: str
    value: int
    note: str  # after the number: a unit, a rate


def funnel_bars(*, chart_id: str, title: str, desc: str, bars: Sequence[Bar]) -> Markup:
    """One full-width row per step: its words and number above a bar as long as its share
    of the first step."""
    row = 40
    height = row * max(len(bars), 1) + 4
    top = max((bar.value for bar in bars), default=0) or 1
    inner = WIDTH - 2
    parts = [_open(chart_id, title, desc, height)]
    for i, bar in enumerate(bars):
        y = i * row
        width = inner * bar.value / top
        parts.append(
            Markup(
                '<g class="funnel-step" data-step="{i}">'
                '<text class="chart-label" x="1" y="{ty}">{label}: {value} {note}</text>'
                '<rect class="bar-track" x="1" y="{by}" width="{inner}" height="16" rx="3"/>'
                '<rect class="bar-step" x="1" y="{by}" width="{w}" height="16" rx="3"/>'
                "</g>"
            ).format(
                i=i,
                ty=y + 14,
                label=bar.label,
                value=bar.value,
                note=bar.note,
                by=y + 20,
                inner=inner,
                w=_num(width),
            )
        )
    parts.append(Markup("</svg>"))
    return Markup("").join(parts)


def deliveries_chart(timeline: Timeline, chart_id: str = "chart-deliveries") -> Markup:
    """The DMs of a `Timeline`, stacked by what became of them."""
    t = timeline
    desc = (
        f"{t.span.words} ({t.zone}), by {'hour' if t.span is Span.HOURS else 'day'}: "
        f"{t.total('sent')} sent, {t.total('failed')} not sent, "
        f"{t.total('unconfirmed')} maybe sent, {t.total('skipped')} skipped."
    )
    return stacked_bars(
        chart_id=chart_id,
        title="DMs over time",
        desc=desc,
        labels=t.labels,
        series=[
            Series("sent", "sent", t.sent),
            Series("not sent", "failed", t.failed),
            Series("maybe sent", "unconfirmed", t.unconfirmed),
            Series("skipped", "skipped", t.skipped),
        ],
        label_every=_label_every(t),
    )


def taps_chart(timeline: Timeline, chart_id: str = "chart-taps") -> Markup:
    t = timeline
    desc = f"{t.span.words} ({t.zone}): {t.total('taps')} link taps."
    return stacked_bars(
        chart_id=chart_id,
        title="Link taps over time",
        desc=desc,
        labels=t.labels,
        series=[Series("link taps", "taps", t.taps)],
        label_every=_label_every(t),
    )


def funnel_chart(funnel: Funnel, chart_id: str = "chart-funnel") -> Markup:
    bars = [
        Bar(
            step.words,
            step.count,
            step.unit if step.rate_percent is None else f"{step.unit} ({step.rate_percent}%)",
        )
        for step in funnel.steps
    ]
    desc = "; ".join(f"{bar.label}: {bar.value} {bar.note}" for bar in bars) + "."
    return funnel_bars(chart_id=chart_id, title="From comment to link", desc=desc, bars=bars)


def _label_every(timeline: Timeline) -> int:
    return 6 if timeline.span is Span.HOURS else 7
