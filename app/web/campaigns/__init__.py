"""Campaign screens under `/campaigns`, one module each: the list (`listing`), the editor
(`editor`, with the DM preview in `preview`, the keyword chips in `keywords`, the post picker
in `media` and the story picker in `stories`), the status buttons (`status`), "Try a comment"
(`try_comment`), the per-campaign summary as CSV (`summary`) and the "Share a report" card
(`report_card`, its forms in `report_links`).

Every state-changing form carries an idempotency key (`app.web.idempotency`), so a double
click saves once and both clicks land on the same page. The rules live in `app.campaigns`.
The handlers are plain functions gathered in one router: the list and the editor's create
share the address `/campaigns`, which two controllers cannot.
"""

from __future__ import annotations

from litestar import Router

from app.web.campaigns import (
    editor,
    keywords,
    listing,
    media,
    preview,
    report_links,
    status,
    stories,
    summary,
    try_comment,
)

campaigns_router = Router(
    path="/campaigns",
    route_handlers=[
        listing.campaign_list,
        summary.summary_export,
        editor.new,
        editor.create,
        editor.edit,
        editor.save,
        preview.preview,
        keywords.keywords,
        media.media,
        stories.stories,
        status.activate,
        status.pause,
        status.archive,
        status.duplicate,
        report_links.create,
        report_links.revoke,
        try_comment.try_page,
        try_comment.try_comment,
    ],
)
