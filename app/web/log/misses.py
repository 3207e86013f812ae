"""`/log/misses`: comments that triggered nothing, and why (no keyword matched, an excluded
keyword, …), filtered and paged like the table; with `kind=stories`, the story replies and
story mentions that got no DM, and why; under the reason, a hint for an emoji keyword the
message held only joined into another emoji (`app.delivery_log.joined_emoji`)."""

from __future__ import annotations

from typing import Any

from litestar.di import NamedDependency
from litestar.plugins.htmx import HTMXRequest
from litestar.response import Template
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.current import Viewer
from app.db.models import MissReason
from app.delivery_log.filters import MissFilter
from app.delivery_log.joined_emoji import comment_hints, story_hints
from app.delivery_log.misses import MISS_REASONS, VERDICTS, fetch_misses
from app.delivery_log.queries import workspace_names
from app.delivery_log.story_misses import fetch_story_misses
from app.web.log.paging import cursors, page_or_results, pager
from app.web.reads import get_or_head


@get_or_head("/misses", name="log_misses")
async def misses(
    request: HTMXRequest,
    viewer: NamedDependency[Viewer],
    db_session: NamedDependency[AsyncSession],
) -> Template:
    f = MissFilter.parse(request.query_params)
    before, after = cursors(request)
    fetch = fetch_story_misses if f.stories else fetch_misses
    page: Any = await fetch(db_session, viewer.workspace_id, f, before=before, after=after)
    hints = story_hints if f.stories else comment_hints
    context = {
        **pager("/log/misses", f.items(), page, before, after),
        "f": f,
        "page": page,
        "names": await workspace_names(db_session, viewer.workspace_id),
        "reasons": [(r.value, MISS_REASONS.get(r, r.value)) for r in MissReason],
        "verdicts": VERDICTS,
        "joined": await hints(db_session, viewer.workspace_id, page.rows),
    }
    return page_or_results(
        request, context, full="log/misses.html", partial="log/_misses_results.html"
    )
