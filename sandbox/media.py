"""``/me``, the account node, ``/{ig-user-id}/media`` and the media node."""

from __future__ import annotations

from typing import Any

from litestar import Response

from sandbox.call import GraphCall
from sandbox.clock import graph_timestamp
from sandbox.errors import invalid_param, unsupported
from sandbox.faults import FaultTarget
from sandbox.fields import FieldTree, parse_fields
from sandbox.models import Account, Media
from sandbox.outcomes import Reply, perform
from sandbox.paging import list_body

ACCOUNT_DEFAULT = "id,user_id,username,account_type"
MEDIA_DEFAULT = "id"


def render_account(account: Account, fields: FieldTree, node_id: str) -> dict[str, Any]:
    values: dict[str, Any] = {
        "id": node_id,
        "user_id": account.user_id,
        "username": account.username,
        "name": account.name,
        "account_type": account.account_type,
        "profile_picture_url": account.profile_picture_url,
        "followers_count": account.followers_count,
        "follows_count": account.follows_count,
        "media_count": len(account.media_ids),
        "biography": account.biography,
    }
    out = {name: values[name] for name in fields if name in values}
    out.setdefault("id", node_id)
    return out


def render_media(call: GraphCall, media: Media, fields: FieldTree) -> dict[str, Any]:
    owner = call.sandbox.world.accounts[media.owner_id]
    values: dict[str, Any] = {
        "id": media.id,
        "caption": media.caption,
        "media_type": media.media_type,
        "media_product_type": media.media_product_type,
        "media_url": media.media_url,
        "permalink": (
            f"https://www.instagram.com/stories/{owner.username}/{media.id}/"
            if media.is_story
            else media.permalink
        ),
        "shortcode": media.shortcode,
        "timestamp": graph_timestamp(media.created_at),
        "comments_count": media.comments_count,
        "like_count": media.like_count,
        "username": owner.username,
        "is_comment_enabled": True,
        "owner": {"id": owner.user_id},
    }
    if media.media_type == "VIDEO":
        values["thumbnail_url"] = media.media_url.rsplit(".", 1)[0] + "_thumb.jpg"
    out = {name: values[name] for name in fields if name in values}
    out.setdefault("id", media.id)
    return out


async def me(call: GraphCall) -> Response[bytes]:
    account = call.account()

    def operation() -> Reply:
        fields = parse_fields(call.param("fields"), ACCOUNT_DEFAULT)
        body = render_account(account, fields, account.app_scoped_id)
        if call.sandbox.settings.me_response_shape == "data":
            return Reply({"data": [body]})
        return Reply(body)

    return await perform(
        call.sandbox,
        call.request,
        endpoint="me",
        target=FaultTarget(account.user_id),
        operation=operation,
    )


async def account_node(call: GraphCall, node_id: str) -> Response[bytes]:
    account = call.own_account(node_id)

    def operation() -> Reply:
        fields = parse_fields(call.param("fields"), ACCOUNT_DEFAULT)
        shown = account.app_scoped_id if node_id == account.app_scoped_id else account.user_id
        return Reply(render_account(account, fields, shown))

    return await perform(
        call.sandbox,
        call.request,
        endpoint="me",
        target=FaultTarget(account.user_id),
        operation=operation,
    )


async def media_edge(call: GraphCall, node_id: str) -> Response[bytes]:
    account = call.own_account(node_id)

    def operation() -> Reply:
        world = call.sandbox.world
        fields = parse_fields(call.param("fields"), MEDIA_DEFAULT)
        since, until = _time_bound(call.param("since")), _time_bound(call.param("until"))

        def visible(media_id: str) -> bool:
            created = world.media[media_id].created_at
            return (since is None or created >= since) and (until is None or created <= until)

        return Reply(
            list_body(
                call,
                account.media_ids,
                lambda mid: render_media(call, world.media[mid], fields),
                visible=visible,
                default_limit=25,
                max_limit=100,
            )
        )

    return await perform(
        call.sandbox,
        call.request,
        endpoint="media",
        target=FaultTarget(account.user_id),
        operation=operation,
    )


async def stories_edge(call: GraphCall, node_id: str) -> Response[bytes]:
    """The account's live stories (posted in the last 24 hours), newest first."""
    account = call.own_account(node_id)

    def operation() -> Reply:
        world = call.sandbox.world
        fields = parse_fields(call.param("fields"), MEDIA_DEFAULT)
        now = call.sandbox.clock.now()
        return Reply(
            list_body(
                call,
                account.story_ids,
                lambda mid: render_media(call, world.media[mid], fields),
                visible=lambda mid: world.media[mid].live_at(now),
                default_limit=25,
                max_limit=100,
            )
        )

    return await perform(
        call.sandbox,
        call.request,
        endpoint="media",
        target=FaultTarget(account.user_id),
        operation=operation,
    )


async def media_node(call: GraphCall, media: Media) -> Response[bytes]:
    account = call.account()
    if media.owner_id != account.user_id or call.method != "GET":
        raise unsupported(call.method, media.id)

    def operation() -> Reply:
        return Reply(render_media(call, media, parse_fields(call.param("fields"), MEDIA_DEFAULT)))

    return await perform(
        call.sandbox,
        call.request,
        endpoint="media",
        target=FaultTarget(account.user_id),
        operation=operation,
    )


def _time_bound(raw: str | None) -> float | None:
    if raw is None or raw == "":
        return None
    try:
        return float(raw)
    except ValueError:
        raise invalid_param("Param since/until must be a unix timestamp") from None
