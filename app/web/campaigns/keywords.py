"""The editor's keyword chips: the keywords (or excluded keywords) as typed, redrawn as chips
with their problem, if any, while someone types; a chip's × posts `remove`. It reads nothing
and writes nothing."""

from __future__ import annotations

from litestar import post
from litestar.di import NamedDependency
from litestar.plugins.htmx import HTMXRequest
from litestar.response import Template

from app.auth.current import Viewer
from app.campaigns.validation import check_keywords, keyword_chips
from app.web.campaigns.common import NO_STORE


@post("/keywords", name="campaign_keywords", status_code=200)
async def keywords(request: HTMXRequest, viewer: NamedDependency[Viewer]) -> Template:
    raw = await request.form()
    field = "excluded_keywords" if raw.get("field") == "excluded_keywords" else "keywords"
    chips = keyword_chips(raw, field)
    remove = str(raw.get("remove") or "").casefold()
    if remove:
        chips = [chip for chip in chips if chip.casefold() != remove]
    label = "excluded keywords" if field == "excluded_keywords" else "keywords"
    return Template(
        "campaigns/_chips.html",
        context={
            "field": field,
            "chips": chips,
            "error": check_keywords(chips, label),
            "can_change": True,
        },
        headers=NO_STORE,
    )
