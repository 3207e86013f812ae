"""Comments: ``/{media}/comments``, the comment node, and public replies.

Only top-level comments are listed, newest first, at most 50 a page; replies come nested
under ``replies`` as ``{"data": [...]}`` when asked for. A public reply to a reply is attached
to the top-level comment, and the account's own comments come back through the ``comments``
webhook like Meta sends them.
"""

from __future__ import annotations

from typing import Any

from litestar import Response

from sandbox.call import GraphCall
from sandbox.clock import graph_timestamp
from sandbox.errors import GraphError, invalid_param, unsupported
from sandbox.faults import FaultTarget
from sandbox.fields import FieldTree, parse_fields
from sandbox.models import Comment
from sandbox.outcomes import Reply, note_error, perform
from sandbox.paging import list_body
from sandbox.tokens import COMMENTS, require_scope
from sandbox.webhook_events import comment_event

COMMENT_DEFAULT = "timestamp,text,id"
REPLY_MAX_CHARS = 2200


def render_comment(call: GraphCall, comment: Comment, fields: FieldTree) -> dict[str, Any]:
    world = call.sandbox.world
    account = world.accounts[comment.account_id]
    if comment.fan is None:
        author = {"id": account.app_scoped_id, "username": account.username}
    else:
        author = {"id": world.fans[comment.fan].igsids[account.user_id], "username": comment.fan}
    out: dict[str, Any] = {}
    for name, sub in fields.items():
        if name == "id":
            out["id"] = comment.id
        elif name == "text":
            out["text"] = comment.text
        elif name == "timestamp":
            out["timestamp"] = graph_timestamp(comment.created_at)
        elif name == "username":
            out["username"] = author["username"]
        elif name == "from":
            out["from"] = {k: v for k, v in author.items() if sub is None or k in sub}
        elif name == "like_count":
            out["like_count"] = comment.like_count
        elif name == "hidden":
            out["hidden"] = comment.hidden
        elif name == "parent_id" and comment.parent_id is not None:
            out["parent_id"] = comment.parent_id
        elif name == "media":
            media = world.media[comment.media_id]
            full = {"id": media.id, "media_product_type": media.media_product_type}
            out["media"] = {k: v for k, v in full.items() if sub is None or k in sub}
        elif name == "user" and comment.fan is None:
            out["user"] = {"id": account.user_id}
        elif name == "replies" and comment.parent_id is None:
            reply_fields = sub if sub is not None else parse_fields(None, COMMENT_DEFAULT)
            replies = [
                render_comment(call, world.comments[rid], reply_fields)
                for rid in comment.reply_ids
                if not world.comments[rid].deleted
            ]
            if replies:
                out["replies"] = {"data": replies}
    out.setdefault("id", comment.id)
    return out


def _owned_comment(call: GraphCall, comment_id: str) -> Comment:
    comment = call.sandbox.world.comments.get(comment_id)
    if comment is None or comment.deleted or comment.account_id != call.account().user_id:
        raise unsupported(call.method, comment_id)
    return comment


async def comments_edge(call: GraphCall, media_id: str) -> Response[bytes]:
    if call.method != "GET":
        raise unsupported(call.method, media_id)
    account = call.account()
    require_scope(call.token(), COMMENTS)
    world = call.sandbox.world
    media = world.media.get(media_id)
    if media is None or media.owner_id != account.user_id:
        raise unsupported(call.method, media_id)

    def operation() -> Reply:
        fields = parse_fields(call.param("fields"), COMMENT_DEFAULT)
        return Reply(
            list_body(
                call,
                media.comment_ids,
                lambda cid: render_comment(call, world.comments[cid], fields),
                visible=lambda cid: not world.comments[cid].deleted,
                default_limit=50,
                max_limit=50,
            )
        )

    return await perform(
        call.sandbox,
        call.request,
        endpoint="comments",
        target=FaultTarget(account.user_id),
        operation=operation,
    )


async def comment_node(call: GraphCall, comment_id: str) -> Response[bytes]:
    account = call.account()
    require_scope(call.token(), COMMENTS)
    comment = _owned_comment(call, comment_id)
    world = call.sandbox.world

    def operation() -> Reply:
        if call.method == "GET":
            fields = parse_fields(call.param("fields"), COMMENT_DEFAULT)
            return Reply(render_comment(call, comment, fields))
        if call.method == "DELETE":
            world.delete_comment(comment)
            return Reply({"success": True})
        hide = call.param("hide")
        if call.method != "POST" or hide not in ("true", "false", "1", "0"):
            raise invalid_param("The parameter hide is required")
        comment.hidden = hide in ("true", "1")
        return Reply({"success": True})

    return await perform(
        call.sandbox,
        call.request,
        endpoint="comments",
        target=FaultTarget(account.user_id, comment_id, comment.fan),
        operation=operation,
    )


async def replies(call: GraphCall, comment_id: str) -> Response[bytes]:
    if call.method == "POST":
        return await _post_reply(call, comment_id)
    if call.method != "GET":
        raise unsupported(call.method, comment_id)
    account = call.account()
    require_scope(call.token(), COMMENTS)
    comment = _owned_comment(call, comment_id)
    world = call.sandbox.world

    def operation() -> Reply:
        fields = parse_fields(call.param("fields"), COMMENT_DEFAULT)
        shown = [world.comments[rid] for rid in comment.reply_ids]
        data = [render_comment(call, reply, fields) for reply in shown if not reply.deleted]
        return Reply({"data": data})

    return await perform(
        call.sandbox,
        call.request,
        endpoint="comments",
        target=FaultTarget(account.user_id, comment_id, comment.fan),
        operation=operation,
    )


async def _post_reply(call: GraphCall, comment_id: str) -> Response[bytes]:
    sandbox = call.sandbox
    world = sandbox.world
    target_comment = world.comments.get(comment_id)
    fan = target_comment.fan if target_comment is not None else None
    text = call.param("message")
    world.counters_for(comment_id).public_reply_requests += 1
    record = sandbox.journal.start_request(
        endpoint="replies",
        method=call.method,
        path=call.path,
        time=call.now(),
        account_id=None,
        comment_id=comment_id,
        fan=fan,
        body={"message": text},
    )
    try:
        account = call.account()
        require_scope(call.token(), COMMENTS)
    except GraphError as error:
        raise note_error(record, error) from None
    record["account_id"] = account.user_id

    def operation() -> Reply:
        comment = _owned_comment(call, comment_id)
        if text is None or not text.strip():
            raise invalid_param("The parameter message is required")
        if len(text) > REPLY_MAX_CHARS:
            raise invalid_param(f"Param message must be at most {REPLY_MAX_CHARS} characters")
        if comment.hidden:
            raise GraphError("(#100) Hidden comments cannot be replied to", 100)
        reply = world.add_comment(
            world.media[comment.media_id], fan=None, text=text, parent=comment
        )
        world.counters_for(comment_id).public_replies += 1
        sandbox.journal.public_replies.append(
            {
                "id": reply.id,
                "comment_id": comment_id,
                "parent_id": reply.parent_id,
                "account_id": account.user_id,
                "media_id": reply.media_id,
                "text": text,
                "time": reply.created_at,
            }
        )
        sandbox.emit(comment_event(world, reply))
        return Reply({"id": reply.id}, delivered=True)

    return await perform(
        sandbox,
        call.request,
        endpoint="replies",
        target=FaultTarget(account.user_id, comment_id, fan),
        operation=operation,
        record=record,
    )
