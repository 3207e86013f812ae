"""What every drawing of a log row needs (the table, the poller, the timeline, a retried row
redrawn in place): the workspace's names, whether the viewer may press its buttons, its zone."""

from __future__ import annotations

from typing import Any

from litestar.plugins.htmx import HTMXRequest

from app.auth.current import Viewer
from app.delivery_log.queries import LogRow, Names

ROLE_NOTE = "Your role lets you see deliveries; owners and admins can retry them."


def row_context(names: Names, viewer: Viewer) -> dict[str, Any]:
    return {
        "names": names,
        "can_change": viewer.can_change,
        "role_note": ROLE_NOTE,
        # Rows are also drawn outside a request (a retry's stored answer): the zone goes along.
        "tz": viewer.time_zone,
    }


def render_row(request: HTMXRequest, row: LogRow, names: Names, viewer: Viewer) -> str:
    """One row's HTML, to store as the answer of the retry that changed it."""
    engine = request.app.template_engine
    assert engine is not None  # noqa: S101 - create_app always configures templates
    template = engine.get_template("log/_row_only.html")
    html: str = template.render(row=row, csrf_input="", **row_context(names, viewer))
    return html
