"""The story picker of the editor: one account's live stories (the last 24 hours), straight
from the Graph API (image URLs expire, so they are never stored). A problem (no account, a
token to reconnect, Instagram not answering) is a sentence in the picker, never an error
page; a chosen story that is no longer live stays chosen, marked as ended."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from litestar.di import NamedDependency
from litestar.params import FromQuery
from litestar.response import Template
from sqlalchemy.ext.asyncio import AsyncSession

from app.accounts.cards import get_account
from app.accounts.connect import account_token
from app.auth.current import Viewer
from app.instagram.graph import GraphError
from app.resources import Resources
from app.web.campaigns.common import NO_STORE
from app.web.reads import get_or_head


@get_or_head("/stories", name="campaign_stories")
async def stories(
    *,
    viewer: NamedDependency[Viewer],
    resources: NamedDependency[Resources],
    db_session: NamedDependency[AsyncSession],
    account_id: FromQuery[int | None] = None,
    story_id: FromQuery[str | None] = None,
    story_time: FromQuery[str | None] = None,
    story_account: FromQuery[int | None] = None,
) -> Template:
    if account_id is None:
        # A read-only editor's account field is disabled: show the campaign's account.
        account_id = story_account
    account = await get_account(db_session, viewer.workspace_id, account_id) if account_id else None
    if story_account is not None and story_account != account_id:
        story_id = story_time = None  # that story belongs to the previously chosen account
    context: dict[str, Any] = {
        "items": [],
        "problem": None,
        "selected": story_id or "",
        "selected_time": story_time or "",
        "account": account,
    }
    token = account_token(resources, account) if account else None
    if account is None:
        context["problem"] = "Choose an account to see its stories."
    elif token is None:
        context["problem"] = f"Reconnect @{account.username} to pick one of its stories."
    else:
        try:
            page = await resources.graph.list_stories(token, account.ig_user_id)
        except GraphError:
            context["problem"] = (
                "Instagram did not send the stories just now. Try again in a moment, "
                "or answer replies to any story."
            )
        else:
            context["items"] = [_story_item(item) for item in page.items]
    return Template("campaigns/_stories.html", context=context, headers=NO_STORE)


def _story_item(item: Mapping[str, Any]) -> dict[str, Any]:
    kind = str(item.get("media_type") or "")
    thumbnail = item.get("thumbnail_url") if kind == "VIDEO" else item.get("media_url")
    timestamp = str(item.get("timestamp") or "")
    return {
        "id": str(item.get("id") or ""),
        "caption": str(item.get("caption") or ""),
        "kind": "Video" if kind == "VIDEO" else "Photo",
        "thumbnail": thumbnail
        if isinstance(thumbnail, str) and thumbnail.startswith("https://")
        else None,
        "timestamp": timestamp[:40],
        "posted": timestamp[:16].replace("T", " "),
    }
