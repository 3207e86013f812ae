"""The events Meta would push to the callback, built from what just happened in the world.

``comments`` travel as ``entry[].changes[]`` values; ``messages`` (fan messages, story replies
with ``reply_to.story``, story mentions as a ``story_mention`` attachment, and echoes of the
business's own sends), ``messaging_postbacks`` and ``messaging_seen`` as ``messaging[]``
items.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

from sandbox.models import Comment, Message
from sandbox.state import World


@dataclass(slots=True)
class WebhookEvent:
    id: int
    field: str
    account_id: str
    kind: Literal["change", "messaging"]
    value: dict[str, Any]
    created_at: float
    comment_id: str | None = None
    fan: str | None = None
    status: str = "pending"
    delivery_ids: list[int] = dataclasses.field(default_factory=list)
    copies: int = 1

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "field": self.field,
            "account_id": self.account_id,
            "kind": self.kind,
            "value": self.value,
            "created_at": self.created_at,
            "comment_id": self.comment_id,
            "fan": self.fan,
            "status": self.status,
            "delivery_ids": self.delivery_ids,
            "copies": self.copies,
        }


def comment_event(world: World, comment: Comment) -> WebhookEvent:
    media = world.media[comment.media_id]
    account = world.accounts[comment.account_id]
    if comment.fan is None:
        # The account's own comments (its public replies too) arrive with from.id == entry.id.
        sender: dict[str, str] = {
            "id": account.user_id,
            "username": account.username,
            "self_ig_scoped_id": account.app_scoped_id,
        }
    else:
        fan = world.fans[comment.fan]
        sender = {"id": fan.igsids[account.user_id], "username": fan.username}
    value: dict[str, Any] = {
        "from": sender,
        "media": {"id": media.id, "media_product_type": media.media_product_type},
        "id": comment.id,
    }
    if comment.parent_id is not None:
        value["parent_id"] = comment.parent_id
    value["text"] = comment.text
    return WebhookEvent(
        id=0,
        field="comments",
        account_id=account.user_id,
        kind="change",
        value=value,
        created_at=comment.created_at,
        comment_id=comment.id,
        fan=comment.fan,
    )


def _parties(message: Message) -> tuple[dict[str, str], dict[str, str]]:
    business, person = {"id": message.account_id}, {"id": message.igsid}
    return (business, person) if message.from_business else (person, business)


def message_event(message: Message) -> WebhookEvent:
    """A fan's message, or the echo of a message the business sent."""
    body: dict[str, Any] = {"mid": message.mid}
    if message.text is not None:
        body["text"] = message.text
    if message.attachment is not None:
        body["attachments"] = [message.attachment]
    if message.quick_reply_payload is not None:
        body["quick_reply"] = {"payload": message.quick_reply_payload}
    if message.reply_to_story is not None:
        body["reply_to"] = {"story": dict(message.reply_to_story)}
    if message.from_business:
        body["is_echo"] = True
    sender, recipient = _parties(message)
    item = {
        "sender": sender,
        "recipient": recipient,
        "timestamp": int(message.created_at * 1000),
        "message": body,
    }
    return WebhookEvent(
        id=0,
        field="messages",
        account_id=message.account_id,
        kind="messaging",
        value=item,
        created_at=message.created_at,
        comment_id=message.comment_id,
        fan=message.fan,
    )


def _from_fan(
    field: str, *, account_id: str, igsid: str, fan: str, at: float, **event: Any
) -> WebhookEvent:
    """A ``messaging[]`` item a fan's action sends to the account (a tap, a read receipt)."""
    item = {
        "sender": {"id": igsid},
        "recipient": {"id": account_id},
        "timestamp": int(at * 1000),
        **event,
    }
    return WebhookEvent(
        id=0,
        field=field,
        account_id=account_id,
        kind="messaging",
        value=item,
        created_at=at,
        fan=fan,
    )


def postback_event(
    *, account_id: str, igsid: str, fan: str, mid: str, title: str, payload: str, at: float
) -> WebhookEvent:
    return _from_fan(
        "messaging_postbacks",
        account_id=account_id,
        igsid=igsid,
        fan=fan,
        at=at,
        postback={"mid": mid, "title": title, "payload": payload},
    )


def seen_event(*, account_id: str, igsid: str, fan: str, mid: str, at: float) -> WebhookEvent:
    return _from_fan(
        "messaging_seen", account_id=account_id, igsid=igsid, fan=fan, at=at, read={"mid": mid}
    )
