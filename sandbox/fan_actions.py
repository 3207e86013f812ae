"""What a fan can do: comment, reply, delete a comment, follow, message, tap, read, reply to
a story and mention an account in their own story.

Shared by the admin API (tests) and the fan page (people), so both produce the same world
changes and the same webhooks. Each action is synchronous, hence atomic on the event loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sandbox.models import Account, Comment, Fan, Message, MessageKind
from sandbox.runtime import Sandbox
from sandbox.webhook_events import comment_event, message_event, postback_event, seen_event

COMMENT_MAX_CHARS = 2200
DM_MAX_BYTES = 1000


class ActionError(Exception):
    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


@dataclass(frozen=True, slots=True)
class Tapped:
    kind: str  # "postback" or "quick_reply"
    mid: str
    title: str
    payload: str

    def as_dict(self) -> dict[str, str]:
        return {"type": self.kind, "mid": self.mid, "title": self.title, "payload": self.payload}


def find_fan(sandbox: Sandbox, ref: str) -> Fan:
    fan = sandbox.world.fan(ref)
    if fan is None:
        raise ActionError(f"no fan {ref!r} (use a username or an IGSID)", 404)
    return fan


def find_account(sandbox: Sandbox, ref: str | None) -> Account:
    account = sandbox.world.account(ref) if ref else None
    if account is None:
        raise ActionError(f"no account {ref!r} (use a username or an id)", 404)
    return account


def _check_text(text: object, limit: int, *, in_bytes: bool = False) -> str:
    if not isinstance(text, str) or not text.strip():
        raise ActionError("text must be a non-empty string")
    size = len(text.encode()) if in_bytes else len(text)
    if size > limit:
        raise ActionError(f"text is longer than {limit} {'bytes' if in_bytes else 'characters'}")
    return text


def comment(
    sandbox: Sandbox, fan: Fan, media_id: str, text: object, parent_id: str | None = None
) -> Comment:
    world = sandbox.world
    media = world.media.get(media_id)
    if media is None:
        raise ActionError(f"no media {media_id!r}", 404)
    if media.is_story:
        raise ActionError(f"media {media_id} is a story: stories take replies, not comments")
    body = _check_text(text, COMMENT_MAX_CHARS)
    parent = None
    if parent_id:
        parent = world.comments.get(parent_id)
        if parent is None or parent.deleted or parent.media_id != media.id:
            raise ActionError(f"no comment {parent_id!r} on media {media_id}", 404)
    created = world.add_comment(media, fan=fan.username, text=body, parent=parent)
    sandbox.emit(comment_event(world, created))
    return created


def delete_comment(sandbox: Sandbox, comment_id: str) -> Comment:
    found = sandbox.world.comments.get(comment_id)
    if found is None:
        raise ActionError(f"no comment {comment_id!r}", 404)
    sandbox.world.delete_comment(found)
    return found


def follow(sandbox: Sandbox, fan: Fan, account: Account) -> None:
    fan.follows.setdefault(account.user_id, sandbox.clock.now())


def unfollow(sandbox: Sandbox, fan: Fan, account: Account) -> None:
    fan.follows.pop(account.user_id, None)


def _fan_message(
    sandbox: Sandbox,
    fan: Fan,
    account: Account,
    text: str | None,
    quick_reply: str | None = None,
    *,
    kind: MessageKind | None = None,
    attachment: dict[str, Any] | None = None,
    reply_to_story: dict[str, str] | None = None,
) -> Message:
    world = sandbox.world
    now = sandbox.clock.now()
    conversation = world.conversation(account.user_id, fan)
    message = Message(
        mid=world.ids.mid(account.user_id),
        account_id=account.user_id,
        fan=fan.username,
        igsid=conversation.igsid,
        from_business=False,
        kind=kind or ("quick_reply" if quick_reply is not None else "fan_message"),
        created_at=now,
        text=text,
        attachment=attachment,
        quick_reply_payload=quick_reply,
        reply_to_story=reply_to_story,
    )
    world.record_message(conversation, message)
    # A message from the person opens the 24-hour window and is consent for profile reads.
    conversation.last_fan_activity = now
    conversation.consented = True
    sandbox.emit(message_event(message))
    return message


def direct_message(sandbox: Sandbox, fan: Fan, account: Account, text: object) -> Message:
    return _fan_message(sandbox, fan, account, _check_text(text, DM_MAX_BYTES, in_bytes=True), None)


def story_reply(
    sandbox: Sandbox, fan: Fan, account: Account, story_id: str, text: object
) -> Message:
    """The fan replies to one of the account's live stories: a DM carrying
    ``reply_to.story {id, url}``, which opens the 24-hour window like any message."""
    story = sandbox.world.media.get(story_id)
    if story is None or not story.is_story or story.owner_id != account.user_id:
        raise ActionError(f"{account.username} has no story {story_id!r}", 404)
    if not story.live_at(sandbox.clock.now()):
        raise ActionError(f"story {story_id} has expired: stories take replies for 24 hours")
    body = _check_text(text, DM_MAX_BYTES, in_bytes=True)
    return _fan_message(
        sandbox,
        fan,
        account,
        body,
        kind="story_reply",
        reply_to_story={"url": story.media_url, "id": story.id},
    )


def story_mention(sandbox: Sandbox, fan: Fan, account: Account) -> Message:
    """The fan posts a story that mentions the account: Instagram puts a message with a
    ``story_mention`` attachment (the story's CDN URL, no id, no text) in the account's inbox."""
    asset = sandbox.world.ids.object_id()
    url = f"https://lookaside.fbsbx.com/ig_messaging_cdn/?asset_id={asset}&signature=sandbox"
    return _fan_message(
        sandbox,
        fan,
        account,
        None,
        kind="story_mention",
        attachment={"type": "story_mention", "payload": {"url": url}},
    )


def _options(message: Message) -> list[dict[str, Any]]:
    """Every tappable thing in a received message: template buttons and quick replies."""
    found: list[dict[str, Any]] = []
    payload = (message.attachment or {}).get("payload")
    if isinstance(payload, dict):
        found.extend(payload.get("buttons") or [])
        for element in payload.get("elements") or []:
            found.extend(element.get("buttons") or [])
    found.extend({"type": "quick_reply", **q} for q in message.quick_replies or [] if "title" in q)
    return found


def tap(
    sandbox: Sandbox,
    fan: Fan,
    account: Account,
    *,
    mid: str | None = None,
    payload: str | None = None,
) -> Tapped:
    """Tap a postback button or quick reply in a message the fan received from ``account``."""
    world = sandbox.world
    if mid:
        received = world.messages.get(mid)
        if received is None or received.fan != fan.username or not received.from_business:
            raise ActionError(f"{fan.username} received no message {mid!r}", 404)
        if received.account_id != account.user_id:
            raise ActionError(f"message {mid} is not from {account.username}", 404)
        candidates = [received]
    else:
        candidates = [m for m in reversed(fan.inbox) if m.account_id == account.user_id]
    for message in candidates:
        for option in _options(message):
            if option.get("type") == "web_url" or (
                payload is not None and option.get("payload") != payload
            ):
                continue
            return _press(sandbox, fan, account, option)
    wanted = f"with payload {payload!r}" if payload is not None else "to tap"
    raise ActionError(f"no postback button or quick reply {wanted} in {fan.username}'s inbox", 404)


def _press(sandbox: Sandbox, fan: Fan, account: Account, option: dict[str, Any]) -> Tapped:
    title, payload = str(option.get("title", "")), str(option.get("payload", ""))
    if option.get("type") == "quick_reply":
        sent = _fan_message(sandbox, fan, account, title, payload)
        return Tapped("quick_reply", sent.mid, title, payload)
    world = sandbox.world
    now = sandbox.clock.now()
    conversation = world.conversation(account.user_id, fan)
    conversation.last_fan_activity = now
    conversation.consented = True
    mid = world.ids.mid(account.user_id)
    sandbox.emit(
        postback_event(
            account_id=account.user_id,
            igsid=conversation.igsid,
            fan=fan.username,
            mid=mid,
            title=title,
            payload=payload,
            at=now,
        )
    )
    return Tapped("postback", mid, title, payload)


def mark_seen(sandbox: Sandbox, fan: Fan, account: Account) -> str | None:
    """The fan opens the thread: a ``messaging_seen`` event for the newest unseen message."""
    conversation = sandbox.world.conversations.get((account.user_id, fan.username))
    if conversation is None:
        return None
    latest = next((m for m in reversed(conversation.messages) if m.from_business), None)
    if latest is None or conversation.seen_mid == latest.mid:
        return None
    conversation.seen_mid = latest.mid
    sandbox.emit(
        seen_event(
            account_id=account.user_id,
            igsid=conversation.igsid,
            fan=fan.username,
            mid=latest.mid,
            at=sandbox.clock.now(),
        )
    )
    return latest.mid
