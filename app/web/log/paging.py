"""One URL, the whole page or only its results: the log's pager links and its answer.

Filters and pages are ordinary links. For htmx the answer is the results alone with the URL
of what they show pushed to the history (`HX-Push-Url`), `Vary: HX-Request` keeps caches
apart, and a history restore gets the whole page (`app.web.htmx.wants_partial`).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from litestar.plugins.htmx import HTMXRequest, HTMXTemplate
from litestar.response import Template

from app.delivery_log.filters import Key
from app.delivery_log.paging import Paged
from app.delivery_log.queries import Page
from app.web.htmx import wants_partial

HEADERS = {"Cache-Control": "no-store", "Vary": "HX-Request"}
NO_STORE = {"Cache-Control": "no-store"}


def url(path: str, items: list[tuple[str, str]]) -> str:
    return f"{path}?{urlencode(items)}" if items else path


def cursors(request: HTMXRequest) -> tuple[Key | None, Key | None]:
    params = request.query_params
    return Key.decode(params.get("before")), Key.decode(params.get("after"))


def pager(
    path: str,
    items: list[tuple[str, str]],
    page: Page | Paged[Any],
    before: Key | None,
    after: Key | None,
) -> dict[str, str | None]:
    """The page's own URL and its pager links, filters kept."""
    if page.first:
        cursor: list[tuple[str, str]] = []
    elif before is not None:
        cursor = [("before", before.encode())]
    else:
        cursor = [("after", after.encode())] if after is not None else []
    return {
        "here": url(path, items + cursor),
        "first_url": url(path, items),
        "older_url": url(path, [*items, ("before", page.older.encode())]) if page.older else None,
        "newer_url": url(path, [*items, ("after", page.newer.encode())]) if page.newer else None,
    }


def page_or_results(
    request: HTMXRequest, context: dict[str, Any], *, full: str, partial: str
) -> Template:
    """The full page, or for htmx only its results, with the URL of what is shown pushed."""
    if wants_partial(request):
        return HTMXTemplate(
            template_name=partial, context=context, headers=HEADERS, push_url=str(context["here"])
        )
    return Template(full, context=context, headers=HEADERS)
