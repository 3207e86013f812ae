"""The post picker of the editor and of "Try a comment": one account's recent posts as
thumbnails, a page at a time, straight from the Graph API (image URLs expire, so they are
never stored). A problem (no account, a token to reconnect, Instagram not answering) is a
sentence in the picker, never an error page. htmx fetches the picker (`media`); without
JavaScript the editor's form asks for the same list and shows it in its page
(`posts_context`, see `app.web.campaigns.editor`)."""

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

MEDIA_PAGE_SIZE = 12
# Meta's media types as a thumbnail's label ("CAROUSEL_ALBUM" is wider than the thumbnail).
MEDIA_KINDS = {"IMAGE": "Photo", "VIDEO": "Video", "CAROUSEL_ALBUM": "Carousel"}


@get_or_head("/media", name="campaign_media")
async def media(
    *,
    viewer: NamedDependency[Viewer],
    resources: NamedDependency[Resources],
    db_session: NamedDependency[AsyncSession],
    account_id: FromQuery[int | None] = None,
    media_id: FromQuery[str | None] = None,
    media_caption: FromQuery[str | None] = None,
    media_account: FromQuery[int | None] = None,
    after: FromQuery[str | None] = None,
) -> Template:
    if account_id is None:
        # A read-only editor's account field is disabled, so the browser does not send it:
        # show the posts of the account the campaign is on.
        account_id = media_account
    if media_account is not None and media_account != account_id:
        media_id = media_caption = None  # that post belongs to the previously chosen account
    context = await posts_context(
        db_session,
        resources,
        viewer.workspace_id,
        account_id,
        selected=media_id or "",
        selected_caption=media_caption or "",
        after=after,
    )
    return Template("campaigns/_media.html", context=context, headers=NO_STORE)


async def posts_context(
    session: AsyncSession,
    resources: Resources,
    workspace_id: int,
    account_id: int | None,
    *,
    selected: str,
    selected_caption: str,
    after: str | None,
    plain: bool = False,
) -> dict[str, Any]:
    """One page of the account's posts for `campaigns/_media.html`, or the sentence saying why
    there is none. `plain`: the editor's page lists them itself, for a browser without
    JavaScript, and its "More posts" submits the form instead of asking htmx."""
    account = await get_account(session, workspace_id, account_id) if account_id else None
    context: dict[str, Any] = {
        "items": [],
        "after": None,
        "problem": None,
        "selected": selected,
        "selected_caption": selected_caption,
        "account": account,
        "append": bool(after) and not plain,
        "plain": plain,
    }
    token = account_token(resources, account) if account else None
    if account is None:
        context["problem"] = "Choose an account to see its posts."
    elif token is None:
        context["problem"] = f"Reconnect @{account.username} to pick one of its posts."
    else:
        try:
            page = await resources.graph.list_media(
                token, account.ig_user_id, after=after, limit=MEDIA_PAGE_SIZE
            )
        except GraphError:
            context["problem"] = (
                "Instagram did not send the posts just now. Try again in a moment, "
                "or choose “any post”."
            )
        else:
            context["items"] = [_media_item(item) for item in page.items]
            context["after"] = page.after
    return context


def _media_item(item: Mapping[str, Any]) -> dict[str, Any]:
    kind = str(item.get("media_type") or "")
    thumbnail = item.get("thumbnail_url") if kind == "VIDEO" else item.get("media_url")
    return {
        "id": str(item.get("id") or ""),
        "caption": str(item.get("caption") or ""),
        "kind": "Reel"
        if item.get("media_product_type") == "REELS"
        else MEDIA_KINDS.get(kind, kind.replace("_", " ").title()),
        "thumbnail": thumbnail
        if isinstance(thumbnail, str) and thumbnail.startswith("https://")
        else None,
        "timestamp": str(item.get("timestamp") or "")[:10],
        "comments": item.get("comments_count"),
    }
