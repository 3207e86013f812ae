"""The Graph API surface: one catch-all route that strips any ``/vNN.N`` prefix and dispatches.

A path names either a node (``/me``, ``/{id}``) or an edge (``/{id}/media``, ``/{id}/stories``,
``/{id}/comments``, ``/{id}/replies``, ``/{id}/messages``, ``/{id}/subscribed_apps``,
``/{id}/conversations``). An
id is looked up in the world to see what it is (conversation, message, IGSID, media, comment,
account), as Meta does. Anything else is 2500 "Unknown path components". Every response
carries ``X-App-Usage``; an unexpected exception becomes code 1, never a stack trace.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from litestar import Request, Response, route

from sandbox import comments, conversations, media, messages, oauth, subscriptions, users
from sandbox.call import GraphCall, unsupported_method
from sandbox.errors import GraphError, unknown_error, unknown_path, unsupported
from sandbox.outcomes import error_response
from sandbox.runtime import sandbox_of

log = logging.getLogger("sandbox")

Edge = Callable[[GraphCall, str], Awaitable[Response[bytes]]]

EDGES: dict[str, tuple[frozenset[str], Edge]] = {
    "media": (frozenset({"GET"}), media.media_edge),
    "stories": (frozenset({"GET"}), media.stories_edge),
    "comments": (frozenset({"GET"}), comments.comments_edge),
    "replies": (frozenset({"GET", "POST"}), comments.replies),
    "messages": (frozenset({"POST"}), messages.send),
    "subscribed_apps": (frozenset({"GET", "POST", "DELETE"}), subscriptions.subscribed_apps),
    "conversations": (frozenset({"GET"}), conversations.conversations_edge),
}


async def dispatch(call: GraphCall) -> Response[bytes]:
    segments = call.segments
    if not segments:
        raise unknown_path("/")
    head = segments[0]
    if len(segments) > 2:
        raise unknown_path("/" + "/".join(segments[2:]))
    if len(segments) == 2:
        known = EDGES.get(segments[1])
        if known is None:
            raise unknown_path("/" + segments[1])
        methods, edge = known
        if call.method not in methods:
            call.token()
            raise unsupported_method(call)
        return await edge(call, head)
    if head == "access_token" and call.method == "GET":
        return await oauth.exchange(call)
    if head == "refresh_access_token" and call.method == "GET":
        return await oauth.refresh(call)
    if head == "me":
        if call.method != "GET":
            call.token()
            raise unsupported_method(call)
        return await media.me(call)
    return await _node(call, head)


async def _node(call: GraphCall, node_id: str) -> Response[bytes]:
    world = call.sandbox.world
    call.token()  # a bad token is reported before anything about the object
    if node_id in world.conversations_by_id:
        return await conversations.conversation_node(call, world.conversations_by_id[node_id])
    if node_id in world.messages:
        return await conversations.message_node(call, world.messages[node_id])
    if node_id in world.igsids:
        return await users.user_profile(call, node_id)
    if node_id in world.media:
        return await media.media_node(call, world.media[node_id])
    if node_id in world.comments:
        return await comments.comment_node(call, node_id)
    if world.account(node_id) is not None and node_id.isdigit():
        if call.method != "GET":
            raise unsupported(call.method, node_id)
        return await media.account_node(call, node_id)
    raise unsupported(call.method, node_id)


@route(
    "/{path:path}",
    http_method=["GET", "POST", "DELETE", "PUT", "PATCH"],
    name="graph",
    include_in_schema=False,
)
async def graph_api(request: Request[Any, Any, Any], path: str) -> Response[bytes]:
    sandbox = sandbox_of(request.app.state)
    sandbox.limits.count_call(sandbox.clock.now())
    try:
        call = await GraphCall.build(sandbox, request, path)
        response = await dispatch(call)
    except GraphError as error:
        response = error_response(error)
    except Exception:
        log.exception("unexpected error on %s %s", request.method, path)
        response = error_response(unknown_error())
    response.headers["X-App-Usage"] = sandbox.limits.app_usage_header()
    return response
