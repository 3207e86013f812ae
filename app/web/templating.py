"""Jinja2 setup: template directory, autoescaping, and the filters pages share.

The templates are laid out by screen, like the handlers: `templates/<screen>/` (accounts,
auth, campaigns, log, overview, team) holds a screen's pages, and the htmx partials only that
screen uses sit next to them as `_*.html`. `templates/partials/` holds the few partials every
screen shares (the notice an htmx form gets, the header's status badge); `base.html` and
`error.html` are at the top. States, Meta's refusals and call results are put in words by
`app.delivery_log.words` (the `state_words` filter, `meta_refusal`, `call_results`).

Every time the dashboard shows goes through the `local_time` filter: a `<time>` element in the
workspace's zone (`app.workspaces.time_zone`), with the UTC time on hover. The zone comes from
the template's `tz` (pages rendered outside a request, such as a stored row) or else from the
signed-in viewer.
"""

from __future__ import annotations

from datetime import UTC, datetime, tzinfo
from pathlib import Path

from jinja2 import pass_context
from jinja2.runtime import Context
from litestar.plugins.jinja import JinjaTemplateEngine
from litestar.template.config import TemplateConfig
from markupsafe import Markup, escape

from app.delivery_log import words
from app.web import svg_charts
from app.web.idempotency import idempotency_input
from app.workspaces.time_zone import zone_or_utc

TEMPLATE_DIR = Path(__file__).resolve().parents[2] / "templates"


def _timeago(value: datetime | None, now: datetime | None = None) -> str:
    if value is None:
        return "—"
    seconds = int(((now or datetime.now(UTC)) - value).total_seconds())
    if seconds < 0:
        return _until(-seconds)
    for unit, size in (("d", 86_400), ("h", 3_600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size} {unit} ago"
    return "just now"


def _until(seconds: int) -> str:
    for unit, size in (("d", 86_400), ("h", 3_600), ("min", 60)):
        if seconds >= size:
            return f"in {seconds // size} {unit}"
    return "in under a minute"


def _zone(context: Context) -> tzinfo:
    name = context.get("tz")
    if not isinstance(name, str):
        request = context.get("request")
        viewer = getattr(getattr(request, "state", None), "viewer", None)
        name = getattr(viewer, "time_zone", None)
    return zone_or_utc(name if isinstance(name, str) else None)


def local_time(
    value: datetime | None,
    zone: tzinfo,
    fmt: str | None = None,
    *,
    relative: bool = False,
    text: str | None = None,
    now: datetime | None = None,
    seconds: bool = True,
) -> Markup:
    """`value` as a `<time>` in `zone`, the UTC time in its title. Without `fmt`: the time of
    day (to the minute when not `seconds`), with the date in front when it is not today in
    that zone; `relative`: "in 6 d"; `text`: the caller's words (a countdown) over the same
    hover."""
    if value is None:
        return Markup("—")
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    local = value.astimezone(zone)
    if text is None:
        text = _shown(value, local, zone, fmt, relative=relative, now=now, seconds=seconds)
    name = str(zone)
    utc = value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    title = utc if name == "UTC" else f"{local.strftime('%Y-%m-%d %H:%M:%S')} {name} · {utc}"
    return Markup('<time datetime="{}" title="{}">{}</time>').format(
        escape(value.isoformat()), escape(title), escape(text)
    )


def _shown(
    value: datetime,
    local: datetime,
    zone: tzinfo,
    fmt: str | None,
    *,
    relative: bool,
    now: datetime | None,
    seconds: bool = True,
) -> str:
    if relative:
        return _timeago(value, now)
    if fmt is not None:
        return local.strftime(fmt)
    today = (now or datetime.now(UTC)).astimezone(zone).date()
    day = "" if local.date() == today else local.strftime("%b %d ")
    return day + local.strftime("%H:%M:%S" if seconds else "%H:%M")


@pass_context
def _local_time_filter(
    context: Context,
    value: datetime | None,
    fmt: str | None = None,
    relative: bool = False,
    text: str | None = None,
    *,
    seconds: bool = True,
) -> Markup:
    return local_time(value, _zone(context), fmt, relative=relative, text=text, seconds=seconds)


def _configure(engine: JinjaTemplateEngine) -> None:
    engine.engine.filters["timeago"] = _timeago
    engine.engine.filters["local_time"] = _local_time_filter
    engine.engine.filters["state_words"] = words.state_words
    engine.engine.globals["meta_refusal"] = words.meta_refusal
    engine.engine.globals["call_results"] = words.CALL_RESULTS
    engine.engine.globals["request_kinds"] = words.REQUEST_KINDS
    engine.engine.globals["message_words"] = words.MESSAGE_WORDS
    engine.engine.globals["checking_note_words"] = words.CHECKING_NOTE_WORDS
    engine.engine.globals["idempotency_input"] = idempotency_input
    engine.engine.globals["deliveries_chart"] = svg_charts.deliveries_chart
    engine.engine.globals["taps_chart"] = svg_charts.taps_chart
    engine.engine.globals["funnel_chart"] = svg_charts.funnel_chart


def template_config() -> TemplateConfig[JinjaTemplateEngine]:
    return TemplateConfig(
        directory=TEMPLATE_DIR, engine=JinjaTemplateEngine, engine_callback=_configure
    )
