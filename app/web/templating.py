"""Jinja2 setup: template directory, autoescaping, and the filters pages share.

The templates are laid out by screen, like the handlers: `templates/<screen>/` (accounts,
auth, campaigns, log, overview, team) holds a screen's pages, and the htmx partials only that
screen uses sit next to them as `_*.html`. `templates/partials/` holds the few partials every
screen shares (the notice an htmx form gets, the header's status badge); `base.html` and
`error.html` are at the top. States, Meta's refusals and call results are put in words by
`app.delivery_log.words` (the `state_words` filter, `meta_refusal`, `call_results`).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from litestar.plugins.jinja import JinjaTemplateEngine
from litestar.template.config import TemplateConfig

from app.delivery_log import words
from app.web.idempotency import idempotency_input

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


def _configure(engine: JinjaTemplateEngine) -> None:
    engine.engine.filters["timeago"] = _timeago
    engine.engine.filters["state_words"] = words.state_words
    engine.engine.globals["meta_refusal"] = words.meta_refusal
    engine.engine.globals["call_results"] = words.CALL_RESULTS
    engine.engine.globals["request_kinds"] = words.REQUEST_KINDS
    engine.engine.globals["message_words"] = words.MESSAGE_WORDS
    engine.engine.globals["checking_note_words"] = words.CHECKING_NOTE_WORDS
    engine.engine.globals["idempotency_input"] = idempotency_input


def template_config() -> TemplateConfig[JinjaTemplateEngine]:
    return TemplateConfig(
        directory=TEMPLATE_DIR, engine=JinjaTemplateEngine, engine_callback=_configure
    )
