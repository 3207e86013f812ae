"""The admin API under ``/_admin``: reset, clock, tokens, faults, settings, webhook
registration, and fan actions. JSON in and out, no auth: it is a dev tool on loopback.

Errors are ``{"error": "..."}`` with 400 (bad input) or 404 (unknown fan, account, media...).
"""

from __future__ import annotations

from typing import Any, Literal, TypeVar

import msgspec
from litestar import Controller, Request, Response, delete, get, post

from sandbox import fan_actions
from sandbox.clock import graph_timestamp
from sandbox.fan_actions import ActionError, find_account, find_fan
from sandbox.faults import FaultSpec
from sandbox.fixture import MediaType, ProductType
from sandbox.models import Comment, Message
from sandbox.runtime import Sandbox, sandbox_of
from sandbox.subscriptions import FIELDS
from sandbox.tokens import ALL_SCOPES, mint

S = TypeVar("S", bound=msgspec.Struct)


class ResetBody(msgspec.Struct, forbid_unknown_fields=True):
    keep_webhook: bool = True


class AdvanceBody(msgspec.Struct, forbid_unknown_fields=True):
    seconds: float


class TokenBody(msgspec.Struct, forbid_unknown_fields=True):
    account: str
    expires_in: float | None = None
    kind: Literal["long", "short"] = "long"
    scopes: list[str] | None = None
    age_seconds: float = 0.0
    subscribe: list[str] | None = None


class RevokeBody(msgspec.Struct, forbid_unknown_fields=True):
    token: str | None = None
    account: str | None = None


class WebhookBody(msgspec.Struct, forbid_unknown_fields=True):
    callback_url: str
    verify_token: str
    sign_with: Literal["instagram", "meta"] = "instagram"


class NewFanBody(msgspec.Struct, forbid_unknown_fields=True):
    username: str
    name: str | None = None


class CommentBody(msgspec.Struct, forbid_unknown_fields=True):
    media_id: str
    text: str
    parent_id: str | None = None


class ReplyBody(msgspec.Struct, forbid_unknown_fields=True):
    comment_id: str
    text: str


class AccountBody(msgspec.Struct, forbid_unknown_fields=True):
    account: str


class DmBody(msgspec.Struct, forbid_unknown_fields=True):
    account: str
    text: str


class StoryReplyBody(msgspec.Struct, forbid_unknown_fields=True):
    account: str
    story_id: str
    text: str


class TapBody(msgspec.Struct, forbid_unknown_fields=True):
    account: str
    mid: str | None = None
    payload: str | None = None


class MediaBody(msgspec.Struct, forbid_unknown_fields=True):
    caption: str
    media_type: MediaType = "IMAGE"
    media_product_type: ProductType = "FEED"


class SubscriptionBody(msgspec.Struct, forbid_unknown_fields=True):
    fields: list[str]


async def decode(request: Request[Any, Any, Any], kind: type[S]) -> S:
    raw = await request.body()
    try:
        return msgspec.json.decode(raw or b"{}", type=kind)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise ActionError(str(exc)) from None


def comment_json(sandbox: Sandbox, comment: Comment) -> dict[str, Any]:
    world = sandbox.world
    account = world.accounts[comment.account_id]
    if comment.fan is None:
        author = {"id": account.user_id, "username": account.username}
    else:
        author = {"id": world.fans[comment.fan].igsids[account.user_id], "username": comment.fan}
    return {
        "id": comment.id,
        "media_id": comment.media_id,
        "account_id": comment.account_id,
        "parent_id": comment.parent_id,
        "text": comment.text,
        "from": author,
        "created_time": graph_timestamp(comment.created_at),
        "deleted": comment.deleted,
        "hidden": comment.hidden,
    }


def message_json(sandbox: Sandbox, message: Message) -> dict[str, Any]:
    account = sandbox.world.accounts[message.account_id]
    return {
        "mid": message.mid,
        "account_id": message.account_id,
        "account_username": account.username,
        "fan": message.fan,
        "igsid": message.igsid,
        "from_business": message.from_business,
        "kind": message.kind,
        "text": message.text,
        "attachment": message.attachment,
        "quick_replies": message.quick_replies,
        "quick_reply_payload": message.quick_reply_payload,
        "comment_id": message.comment_id,
        "reply_to_story": message.reply_to_story,
        "time": message.created_at,
        "created_time": graph_timestamp(message.created_at),
    }


def action_error(_: Request[Any, Any, Any], exc: Exception) -> Response[dict[str, str]]:
    if isinstance(exc, ActionError):
        return Response({"error": exc.message}, status_code=exc.status)
    return Response({"error": str(exc)}, status_code=400)


def _clock(sandbox: Sandbox) -> dict[str, Any]:
    now = sandbox.clock.now()
    return {"now": now, "iso": graph_timestamp(now), "offset_seconds": sandbox.clock.offset}


async def _set_following(
    request: Request[Any, Any, Any], fan: str, *, following: bool
) -> dict[str, Any]:
    body = await decode(request, AccountBody)
    sandbox = sandbox_of(request.app.state)
    account = find_account(sandbox, body.account)
    change = fan_actions.follow if following else fan_actions.unfollow
    change(sandbox, find_fan(sandbox, fan), account)
    return {"following": following, "account_id": account.user_id}


class AdminController(Controller):
    path = "/_admin"
    include_in_schema = False

    @get("/health", sync_to_thread=False)
    def health(self, request: Request[Any, Any, Any]) -> dict[str, Any]:
        sandbox = sandbox_of(request.app.state)
        registration = sandbox.webhooks.registration
        return {
            "status": "ok",
            "time": sandbox.clock.now(),
            "public_url": sandbox.config.public_url,
            "webhook_registered": registration is not None,
        }

    @post("/reset", status_code=200)
    async def reset(self, request: Request[Any, Any, Any]) -> dict[str, Any]:
        body = await decode(request, ResetBody)
        sandbox = sandbox_of(request.app.state)
        sandbox.reset(keep_webhook=body.keep_webhook)
        return {"status": "reset", "webhook_kept": sandbox.webhooks.registration is not None}

    @get("/clock", sync_to_thread=False)
    def clock(self, request: Request[Any, Any, Any]) -> dict[str, Any]:
        return _clock(sandbox_of(request.app.state))

    @post("/clock/advance", status_code=200)
    async def advance(self, request: Request[Any, Any, Any]) -> dict[str, Any]:
        body = await decode(request, AdvanceBody)
        sandbox = sandbox_of(request.app.state)
        try:
            sandbox.clock.advance(body.seconds)
        except ValueError as exc:
            raise ActionError(str(exc)) from None
        return _clock(sandbox)

    @post("/tokens", status_code=200)
    async def mint_token(self, request: Request[Any, Any, Any]) -> dict[str, Any]:
        body = await decode(request, TokenBody)
        sandbox = sandbox_of(request.app.state)
        account = find_account(sandbox, body.account)
        scopes = tuple(body.scopes) if body.scopes is not None else ALL_SCOPES
        unknown = [s for s in scopes if s not in ALL_SCOPES]
        if unknown:
            raise ActionError(f"unknown scopes {unknown}")
        if body.subscribe is not None:
            wrong = [f for f in body.subscribe if f not in FIELDS]
            if wrong:
                raise ActionError(f"unknown webhook fields {wrong}")
            account.subscribed_fields = list(dict.fromkeys(body.subscribe))
            account.subscribed_scopes = scopes
        if body.expires_in is not None and body.expires_in <= 0:
            raise ActionError("expires_in must be positive")
        token = mint(
            sandbox.world,
            account,
            kind=body.kind,
            scopes=scopes,
            source="admin",
            lifetime=body.expires_in,
            age=body.age_seconds,
        )
        return {
            "access_token": token.value,
            "token_type": "bearer",
            "expires_in": int(token.expires_at - sandbox.clock.now()),
            "expires_at": token.expires_at,
            "kind": token.kind,
            "scopes": list(token.scopes),
            "account_id": account.user_id,
            "app_scoped_id": account.app_scoped_id,
            "username": account.username,
        }

    @post("/tokens/revoke", status_code=200)
    async def revoke(self, request: Request[Any, Any, Any]) -> dict[str, int]:
        body = await decode(request, RevokeBody)
        sandbox = sandbox_of(request.app.state)
        if (body.token is None) == (body.account is None):
            raise ActionError("give exactly one of token or account")
        tokens = sandbox.world.tokens
        if body.token is not None:
            chosen = [tokens[body.token]] if body.token in tokens else []
        else:
            account = find_account(sandbox, body.account)
            chosen = [t for t in tokens.values() if t.account_id == account.user_id]
        for token in chosen:
            token.revoked = True
        return {"revoked": len(chosen)}

    @get("/faults", sync_to_thread=False)
    def list_faults(self, request: Request[Any, Any, Any]) -> list[dict[str, Any]]:
        return [rule.as_dict() for rule in sandbox_of(request.app.state).faults.rules()]

    @post("/faults", status_code=201)
    async def add_fault(self, request: Request[Any, Any, Any]) -> dict[str, Any]:
        spec = await decode(request, FaultSpec)
        sandbox = sandbox_of(request.app.state)
        return sandbox.faults.add(spec, sandbox.world).as_dict()

    @delete("/faults", status_code=200)
    async def clear_faults(self, request: Request[Any, Any, Any]) -> dict[str, str]:
        sandbox_of(request.app.state).faults.clear()
        return {"status": "cleared"}

    @delete("/faults/{fault_id:str}", status_code=200)
    async def remove_fault(self, request: Request[Any, Any, Any], fault_id: str) -> dict[str, str]:
        if not sandbox_of(request.app.state).faults.remove(fault_id):
            raise ActionError(f"no fault {fault_id!r}", 404)
        return {"status": "removed", "id": fault_id}

    @get("/settings", sync_to_thread=False)
    def get_settings(self, request: Request[Any, Any, Any]) -> dict[str, Any]:
        return sandbox_of(request.app.state).settings.as_dict()

    @post("/settings", status_code=200)
    async def set_settings(self, request: Request[Any, Any, Any]) -> dict[str, Any]:
        sandbox = sandbox_of(request.app.state)
        try:
            changes = msgspec.json.decode(await request.body() or b"{}", type=dict[str, Any])
            sandbox.apply_settings(changes)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            raise ActionError(str(exc)) from None
        return sandbox.settings.as_dict()

    @get("/webhook", sync_to_thread=False)
    def get_webhook(self, request: Request[Any, Any, Any]) -> dict[str, Any]:
        registration = sandbox_of(request.app.state).webhooks.registration
        return {"registered": registration is not None} | (
            registration.as_dict() if registration is not None else {}
        )

    @post("/webhook", status_code=200)
    async def register_webhook(self, request: Request[Any, Any, Any]) -> dict[str, Any]:
        body = await decode(request, WebhookBody)
        sandbox = sandbox_of(request.app.state)
        return await sandbox.webhooks.register(body.callback_url, body.verify_token, body.sign_with)

    @delete("/webhook", status_code=200)
    async def remove_webhook(self, request: Request[Any, Any, Any]) -> dict[str, bool]:
        sandbox_of(request.app.state).webhooks.unregister()
        return {"registered": False}

    @post("/webhooks/flush", status_code=200)
    async def flush(self, request: Request[Any, Any, Any]) -> dict[str, int]:
        return await sandbox_of(request.app.state).webhooks.flush()

    @post("/fans", status_code=201)
    async def add_fan(self, request: Request[Any, Any, Any]) -> dict[str, Any]:
        body = await decode(request, NewFanBody)
        sandbox = sandbox_of(request.app.state)
        name = body.username.removeprefix("@").strip()
        if not name or sandbox.world.fan(name) or sandbox.world.account(name):
            raise ActionError(f"username {body.username!r} is empty or taken")
        fan = sandbox.world.add_fan(name, body.name or name)
        return {"username": fan.username, "name": fan.name, "igsids": fan.igsids}

    @post("/fans/{fan:str}/comment", status_code=201)
    async def fan_comment(self, request: Request[Any, Any, Any], fan: str) -> dict[str, Any]:
        body = await decode(request, CommentBody)
        sandbox = sandbox_of(request.app.state)
        created = fan_actions.comment(
            sandbox, find_fan(sandbox, fan), body.media_id, body.text, body.parent_id
        )
        return comment_json(sandbox, created)

    @post("/fans/{fan:str}/reply", status_code=201)
    async def fan_reply(self, request: Request[Any, Any, Any], fan: str) -> dict[str, Any]:
        body = await decode(request, ReplyBody)
        sandbox = sandbox_of(request.app.state)
        parent = sandbox.world.comments.get(body.comment_id)
        if parent is None:
            raise ActionError(f"no comment {body.comment_id!r}", 404)
        created = fan_actions.comment(
            sandbox, find_fan(sandbox, fan), parent.media_id, body.text, parent.id
        )
        return comment_json(sandbox, created)

    @post("/fans/{fan:str}/follow", status_code=200)
    async def fan_follow(self, request: Request[Any, Any, Any], fan: str) -> dict[str, Any]:
        return await _set_following(request, fan, following=True)

    @post("/fans/{fan:str}/unfollow", status_code=200)
    async def fan_unfollow(self, request: Request[Any, Any, Any], fan: str) -> dict[str, Any]:
        return await _set_following(request, fan, following=False)

    @post("/fans/{fan:str}/dm", status_code=201)
    async def fan_dm(self, request: Request[Any, Any, Any], fan: str) -> dict[str, Any]:
        body = await decode(request, DmBody)
        sandbox = sandbox_of(request.app.state)
        sent = fan_actions.direct_message(
            sandbox, find_fan(sandbox, fan), find_account(sandbox, body.account), body.text
        )
        return message_json(sandbox, sent)

    @post("/fans/{fan:str}/story_reply", status_code=201)
    async def fan_story_reply(self, request: Request[Any, Any, Any], fan: str) -> dict[str, Any]:
        body = await decode(request, StoryReplyBody)
        sandbox = sandbox_of(request.app.state)
        sent = fan_actions.story_reply(
            sandbox,
            find_fan(sandbox, fan),
            find_account(sandbox, body.account),
            body.story_id,
            body.text,
        )
        return message_json(sandbox, sent)

    @post("/fans/{fan:str}/story_mention", status_code=201)
    async def fan_story_mention(self, request: Request[Any, Any, Any], fan: str) -> dict[str, Any]:
        body = await decode(request, AccountBody)
        sandbox = sandbox_of(request.app.state)
        sent = fan_actions.story_mention(
            sandbox, find_fan(sandbox, fan), find_account(sandbox, body.account)
        )
        return message_json(sandbox, sent)

    @post("/fans/{fan:str}/tap", status_code=200)
    async def fan_tap(self, request: Request[Any, Any, Any], fan: str) -> dict[str, str]:
        body = await decode(request, TapBody)
        sandbox = sandbox_of(request.app.state)
        tapped = fan_actions.tap(
            sandbox,
            find_fan(sandbox, fan),
            find_account(sandbox, body.account),
            mid=body.mid,
            payload=body.payload,
        )
        return tapped.as_dict()

    @post("/fans/{fan:str}/seen", status_code=200)
    async def fan_seen(self, request: Request[Any, Any, Any], fan: str) -> dict[str, Any]:
        body = await decode(request, AccountBody)
        sandbox = sandbox_of(request.app.state)
        mid = fan_actions.mark_seen(
            sandbox, find_fan(sandbox, fan), find_account(sandbox, body.account)
        )
        return {"seen_mid": mid}

    @delete("/comments/{comment_id:str}", status_code=200)
    async def delete_comment(
        self, request: Request[Any, Any, Any], comment_id: str
    ) -> dict[str, Any]:
        sandbox = sandbox_of(request.app.state)
        return comment_json(sandbox, fan_actions.delete_comment(sandbox, comment_id))

    @post("/accounts/{account:str}/subscription", status_code=200)
    async def set_subscription(
        self, request: Request[Any, Any, Any], account: str
    ) -> dict[str, Any]:
        """Change an account's subscribed fields as if someone else had (an unsubscribed field)."""
        body = await decode(request, SubscriptionBody)
        owner = find_account(sandbox_of(request.app.state), account)
        wrong = [f for f in body.fields if f not in FIELDS]
        if wrong:
            raise ActionError(f"unknown webhook fields {wrong}")
        owner.subscribed_fields = list(dict.fromkeys(body.fields))
        return {
            "account_id": owner.user_id,
            "subscribed_fields": owner.subscribed_fields,
            "scopes": list(owner.subscribed_scopes),
        }

    @post("/accounts/{account:str}/media", status_code=201)
    async def publish(self, request: Request[Any, Any, Any], account: str) -> dict[str, Any]:
        body = await decode(request, MediaBody)
        sandbox = sandbox_of(request.app.state)
        owner = find_account(sandbox, account)
        created = sandbox.world.add_media(
            owner,
            caption=body.caption,
            media_type=body.media_type,
            media_product_type=body.media_product_type,
            created_at=sandbox.clock.now(),
        )
        published = {
            "id": created.id,
            "owner_id": owner.user_id,
            "caption": created.caption,
            "media_type": created.media_type,
            "media_product_type": created.media_product_type,
            "permalink": created.permalink,
            "timestamp": graph_timestamp(created.created_at),
        }
        if created.is_story:
            published["expires_time"] = graph_timestamp(created.expires_at)
        return published
