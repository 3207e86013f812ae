"""The Conversations API: find a thread by IGSID and read its 20 newest messages.

Limited to ``conversations_per_second`` calls per account (Meta documents 2/s).
"""

from __future__ import annotations

from typing import Any

from litestar import Response

from sandbox.call import GraphCall
from sandbox.clock import graph_timestamp
from sandbox.errors import invalid_param, unsupported
from sandbox.faults import FaultTarget
from sandbox.fields import FieldTree, parse_fields
from sandbox.models import Account, Conversation, Message
from sandbox.outcomes import Reply, perform
from sandbox.paging import list_body
from sandbox.tokens import MESSAGES, require_scope

NEWEST_READABLE = 20
MESSAGE_DEFAULT = "id,created_time"


def _party(call: GraphCall, message: Message, business: bool) -> dict[str, str]:
    world = call.sandbox.world
    if business:
        account = world.accounts[message.account_id]
        return {"username": account.username, "id": account.user_id}
    return {"username": message.fan, "id": message.igsid}


def render_message(call: GraphCall, message: Message, fields: FieldTree) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in fields:
        if name == "id":
            out["id"] = message.mid
        elif name == "created_time":
            out["created_time"] = graph_timestamp(message.created_at)
        elif name == "from":
            out["from"] = _party(call, message, message.from_business)
        elif name == "to":
            out["to"] = {"data": [_party(call, message, not message.from_business)]}
        elif name == "message":
            # Templates read back as their text; how Meta renders them here is unverified.
            payload = (message.attachment or {}).get("payload") or {}
            out["message"] = message.text or payload.get("text") or ""
        elif name == "attachments" and message.attachment is not None:
            out["attachments"] = {"data": [message.attachment]}
    out.setdefault("id", message.mid)
    return out


def _render_conversation(
    call: GraphCall, conversation: Conversation, fields: FieldTree
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, sub in fields.items():
        if name == "id":
            out["id"] = conversation.id
        elif name == "updated_time":
            out["updated_time"] = graph_timestamp(conversation.updated_at)
        elif name == "participants":
            account = call.sandbox.world.accounts[conversation.account_id]
            out["participants"] = {
                "data": [
                    {"username": account.username, "id": account.user_id},
                    {"username": conversation.fan, "id": conversation.igsid},
                ]
            }
        elif name == "messages":
            newest = conversation.messages[-NEWEST_READABLE:][::-1]
            message_fields = sub if sub is not None else parse_fields(None, MESSAGE_DEFAULT)
            out["messages"] = {"data": [render_message(call, m, message_fields) for m in newest]}
    out.setdefault("id", conversation.id)
    return out


def _limited(call: GraphCall, account: Account) -> None:
    sandbox = call.sandbox
    sandbox.limits.take_conversation_call(
        account.user_id, call.now(), sandbox.settings.conversations_per_second
    )


async def conversations_edge(call: GraphCall, node_id: str) -> Response[bytes]:
    if call.method != "GET":
        raise unsupported(call.method, node_id)
    account = call.own_account(node_id)
    require_scope(call.token(), MESSAGES)
    world = call.sandbox.world

    def operation() -> Reply:
        platform = call.param("platform")
        if platform not in (None, "instagram"):
            raise invalid_param("Param platform must be instagram")
        _limited(call, account)
        fields = parse_fields(call.param("fields"), "id,updated_time")
        user_id = call.param("user_id")
        if user_id is not None:
            entry = world.igsids.get(user_id)
            found = (
                world.conversations.get((account.user_id, entry[0].username))
                if entry is not None and entry[1] == account.user_id
                else None
            )
            return Reply({"data": [_render_conversation(call, found, fields)] if found else []})
        mine = sorted(
            (c for c in world.conversations.values() if c.account_id == account.user_id),
            key=lambda c: c.updated_at,
        )
        return Reply(
            list_body(
                call,
                mine,
                lambda conversation: _render_conversation(call, conversation, fields),
                default_limit=25,
                max_limit=100,
            )
        )

    return await perform(
        call.sandbox,
        call.request,
        endpoint="conversations",
        target=FaultTarget(account.user_id),
        operation=operation,
    )


async def conversation_node(call: GraphCall, conversation: Conversation) -> Response[bytes]:
    account = call.account()
    require_scope(call.token(), MESSAGES)
    if conversation.account_id != account.user_id or call.method != "GET":
        raise unsupported(call.method, conversation.id)

    def operation() -> Reply:
        _limited(call, account)
        fields = parse_fields(call.param("fields"), "id,updated_time")
        return Reply(_render_conversation(call, conversation, fields))

    return await perform(
        call.sandbox,
        call.request,
        endpoint="conversations",
        target=FaultTarget(account.user_id, None, conversation.fan),
        operation=operation,
    )


async def message_node(call: GraphCall, message: Message) -> Response[bytes]:
    account = call.account()
    require_scope(call.token(), MESSAGES)
    if message.account_id != account.user_id or call.method != "GET":
        raise unsupported(call.method, message.mid)

    def operation() -> Reply:
        thread = call.sandbox.world.conversations[(message.account_id, message.fan)]
        if message not in thread.messages[-NEWEST_READABLE:]:
            raise invalid_param(
                f"Only the {NEWEST_READABLE} most recent messages of a conversation can be read"
            )
        fields = parse_fields(call.param("fields"), "id,created_time,from,to,message")
        return Reply(render_message(call, message, fields))

    return await perform(
        call.sandbox,
        call.request,
        endpoint="conversations",
        target=FaultTarget(account.user_id, message.comment_id, message.fan),
        operation=operation,
    )
