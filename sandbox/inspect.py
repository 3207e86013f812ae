"""The inspection API under ``/_inspect``: what each fan received, every public reply, every
send request, per-comment counts, and every webhook event and delivery attempt.

This is how a test proves "exactly one": ``GET /_inspect/comments/{id}`` counts delivered
private replies and send requests for that comment, and ``GET /_inspect/inbox/{fan}`` lists
what the person actually saw.
"""

from __future__ import annotations

from typing import Any

from litestar import Controller, Request, get

from sandbox.admin import comment_json, message_json
from sandbox.fan_actions import ActionError, find_account, find_fan
from sandbox.runtime import Sandbox, sandbox_of


def _account_id(sandbox: Sandbox, ref: str | None) -> str | None:
    return find_account(sandbox, ref).user_id if ref else None


def _fan_name(sandbox: Sandbox, ref: str | None) -> str | None:
    return find_fan(sandbox, ref).username if ref else None


class InspectController(Controller):
    path = "/_inspect"
    include_in_schema = False

    @get("/world", sync_to_thread=False)
    def world(self, request: Request[Any, Any, Any]) -> dict[str, Any]:
        sandbox = sandbox_of(request.app.state)
        world = sandbox.world
        return {
            "app": {"id": sandbox.config.instagram_app_id, "name": world.app_name},
            "accounts": [
                {
                    "user_id": a.user_id,
                    "app_scoped_id": a.app_scoped_id,
                    "username": a.username,
                    "name": a.name,
                    "media_ids": list(a.media_ids),
                    "subscribed_fields": list(a.subscribed_fields),
                }
                for a in world.accounts.values()
            ],
            "fans": [
                {
                    "username": f.username,
                    "name": f.name,
                    "igsids": dict(f.igsids),
                    "follows": sorted(f.follows),
                }
                for f in world.fans.values()
            ],
            "media": [
                {
                    "id": m.id,
                    "owner_id": m.owner_id,
                    "caption": m.caption,
                    "media_product_type": m.media_product_type,
                    "comment_ids": list(m.comment_ids),
                }
                for m in world.media.values()
            ],
        }

    @get("/inbox/{fan:str}", sync_to_thread=False)
    def inbox(self, request: Request[Any, Any, Any], fan: str) -> dict[str, Any]:
        sandbox = sandbox_of(request.app.state)
        person = find_fan(sandbox, fan)
        return {
            "fan": person.username,
            "igsids": dict(person.igsids),
            "messages": [message_json(sandbox, m) for m in person.inbox],
        }

    @get("/messages", sync_to_thread=False)
    def messages(
        self,
        request: Request[Any, Any, Any],
        account: str | None = None,
        comment_id: str | None = None,
        recipient: str | None = None,
    ) -> list[dict[str, Any]]:
        sandbox = sandbox_of(request.app.state)
        account_id, fan = _account_id(sandbox, account), _fan_name(sandbox, recipient)
        return [
            message_json(sandbox, m)
            for m in sandbox.journal.delivered
            if (account_id is None or m.account_id == account_id)
            and (comment_id is None or m.comment_id == comment_id)
            and (fan is None or m.fan == fan)
        ]

    @get("/replies", sync_to_thread=False)
    def replies(
        self,
        request: Request[Any, Any, Any],
        account: str | None = None,
        comment_id: str | None = None,
    ) -> list[dict[str, Any]]:
        sandbox = sandbox_of(request.app.state)
        account_id = _account_id(sandbox, account)
        return [
            r
            for r in sandbox.journal.public_replies
            if (account_id is None or r["account_id"] == account_id)
            and (comment_id is None or r["comment_id"] == comment_id)
        ]

    @get("/requests", sync_to_thread=False)
    def requests(
        self,
        request: Request[Any, Any, Any],
        endpoint: str | None = None,
        account: str | None = None,
        comment_id: str | None = None,
        since: int = 0,
    ) -> list[dict[str, Any]]:
        sandbox = sandbox_of(request.app.state)
        account_id = _account_id(sandbox, account)
        return [
            r
            for r in sandbox.journal.requests[max(since, 0) :]
            if (endpoint is None or r["endpoint"] == endpoint)
            and (account_id is None or r["account_id"] == account_id)
            and (comment_id is None or r["comment_id"] == comment_id)
        ]

    @get("/comments/{comment_id:str}", sync_to_thread=False)
    def comment(self, request: Request[Any, Any, Any], comment_id: str) -> dict[str, Any]:
        sandbox = sandbox_of(request.app.state)
        world = sandbox.world
        found = world.comments.get(comment_id)
        counters = world.counters.get(comment_id)
        if found is None and counters is None:
            raise ActionError(f"no comment {comment_id!r}", 404)
        counts = world.counters_for(comment_id)
        return {
            "comment_id": comment_id,
            "exists": found is not None,
            "comment": comment_json(sandbox, found) if found is not None else None,
            "private_replies_delivered": counts.private_replies_delivered,
            "send_requests": counts.send_requests,
            "public_replies": counts.public_replies,
            "public_reply_requests": counts.public_reply_requests,
            "messages": [
                message_json(sandbox, m)
                for m in sandbox.journal.delivered
                if m.comment_id == comment_id
            ],
        }

    @get("/webhooks", sync_to_thread=False)
    def webhooks(self, request: Request[Any, Any, Any], since: int = 0) -> list[dict[str, Any]]:
        return sandbox_of(request.app.state).webhooks.attempts[max(since, 0) :]

    @get("/webhook-events", sync_to_thread=False)
    def webhook_events(
        self,
        request: Request[Any, Any, Any],
        field: str | None = None,
        status: str | None = None,
    ) -> dict[str, Any]:
        sender = sandbox_of(request.app.state).webhooks
        events = [
            e.as_dict()
            for e in sender.events
            if (field is None or e.field == field) and (status is None or e.status == status)
        ]
        return {"in_flight": sender.in_flight(), "events": events}
