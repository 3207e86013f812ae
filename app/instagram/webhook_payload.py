"""Typed parse of a webhook body into the items we act on, plus everything we could not use.

Pure functions, no I/O. `decode_body` turns raw bytes into a JSON object (or refuses them);
`parse_webhook` walks the whole envelope and returns:

- `comments`: one `CommentItem` per `comments`/`live_comments` change, in either shape Meta
  uses — `entry[].changes[]` or the flat `entry[].field/value`;
- `messaging`: one `MessagingItem` per `entry[].messaging[]` item (messages, echoes,
  postbacks, reactions, reads, referrals, edits), also when one arrives in the changes shape
  (Meta's dashboard "Test" button sends `{"field": "messages", "value": {...}}`); a message
  that replies to one of the account's stories (`reply_to.story {id, url}`) or mentions the
  account in the person's own story (an attachment of type `story_mention`) carries a
  `StoryRef`;
- `problems`: items that were malformed (wrong field types, missing ids, ids too long to
  store), each with its JSON path — they are skipped, never half-stored;
- `ignored`: counts of fields and objects we receive but do not act on (`mentions`,
  `standby`, …) — recorded, not fatal.

Only a body that is not JSON, not a JSON object, not `object: "instagram"` or has no usable
`entry` list raises `EnvelopeError`: nothing in it can be processed.

`comment_from_graph` builds the same `CommentItem` from a comment read with the Graph API
(the reconciler's poll), so both paths feed one ingest function.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

import msgspec

from app.db.models import MessagingEventKind
from app.instagram import payload_fields as fields

COMMENT_FIELDS = frozenset({"comments", "live_comments"})
# Fields whose change value has the shape of one `messaging[]` item.
MESSAGING_FIELDS = frozenset(
    {
        "messages",
        "messaging_postbacks",
        "message_reactions",
        "messaging_seen",
        "messaging_referral",
        "message_edit",
        "messaging_optins",
    }
)
# Problems kept per event; the count is always exact.
MAX_PROBLEMS_KEPT = 50
# Meta's envelopes nest about seven levels; a body nested far deeper is no webhook, and
# everything that walks it later (parsing, storing as jsonb, logging) stays well in bounds.
MAX_DEPTH = 64

# The kinds of messaging items are the messaging ledger's: an item's kind is stored as it is.
MessagingKind = MessagingEventKind


class EnvelopeError(ValueError):
    """The body as a whole cannot be processed; the message says why."""


@dataclass(frozen=True, slots=True)
class CommentItem:
    """One comment, as a webhook or a poll reported it."""

    account_ig_id: str  # the professional account the comment is on (`entry.id`)
    comment_id: str
    text: str
    commenter_id: str | None
    commenter_username: str | None
    # Written by the account itself (its own public replies too): never work, or we loop.
    is_own: bool
    media_id: str | None
    original_media_id: str | None  # set on comments on an ad copy of an organic post
    media_product_type: str | None
    parent_id: str | None  # set when the comment is a reply to another comment
    commented_at: datetime
    field: str = "comments"


class StoryAction(StrEnum):
    REPLY = "reply"  # a reply to one of the account's stories
    MENTION = "mention"  # the person mentioned the account in their own story


@dataclass(frozen=True, slots=True)
class StoryRef:
    """The story a message is about: the account's story it replies to (its id and URL), or
    the person's story that mentions the account (a CDN URL; Meta gives no id)."""

    action: StoryAction
    story_id: str | None
    url: str | None


@dataclass(frozen=True, slots=True)
class MessagingItem:
    """One `messaging[]` item: who, what, when; `user_id` is always the person, not us."""

    account_ig_id: str
    kind: MessagingKind
    user_id: str | None
    mid: str | None
    text: str | None
    payload: str | None  # postback payload, quick-reply payload or referral ref
    occurred_at: datetime
    is_deleted: bool = False
    is_unsupported: bool = False
    # A message whose sender is the account itself without being an echo (`is_self`).
    is_self: bool = False
    extra: Mapping[str, Any] = field(default_factory=dict)
    story: StoryRef | None = None


@dataclass(frozen=True, slots=True)
class PayloadProblem:
    path: str
    message: str

    def as_json(self) -> dict[str, str]:
        return {"path": self.path, "message": self.message}


@dataclass(slots=True)
class ParsedWebhook:
    comments: list[CommentItem] = field(default_factory=list)
    messaging: list[MessagingItem] = field(default_factory=list)
    problems: list[PayloadProblem] = field(default_factory=list)
    problem_count: int = 0
    ignored: dict[str, int] = field(default_factory=dict)

    @property
    def item_count(self) -> int:
        """Every item the body carried: used, malformed or ignored."""
        return (
            len(self.comments)
            + len(self.messaging)
            + self.problem_count
            + sum(self.ignored.values())
        )

    def problem(self, path: str, message: str) -> None:
        self.problem_count += 1
        if len(self.problems) < MAX_PROBLEMS_KEPT:
            self.problems.append(PayloadProblem(path, message))

    def ignore(self, what: str) -> None:
        self.ignored[what] = self.ignored.get(what, 0) + 1


@dataclass(frozen=True, slots=True)
class _Entry:
    """What every item of one entry shares."""

    account: str  # entry.id
    time: object  # entry.time, unvalidated
    received_at: datetime


def decode_body(raw: bytes) -> dict[str, Any]:
    """Parse `raw` as a JSON object nested at most `MAX_DEPTH` levels; `EnvelopeError` says
    why it is not one."""
    try:
        document = msgspec.json.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise EnvelopeError(f"not JSON: {exc}") from None
    except RecursionError:
        raise EnvelopeError(f"nested deeper than {MAX_DEPTH} levels") from None
    if not isinstance(document, dict):
        raise EnvelopeError(f"not a JSON object but {fields.type_name(document)}")
    if _deeper_than(document, MAX_DEPTH):
        raise EnvelopeError(f"nested deeper than {MAX_DEPTH} levels")
    return document


def check_object(raw: bytes) -> None:
    """Is `raw` JSON syntax around one object? `EnvelopeError` says why not.

    The cheap check for a large body on the web's event loop: values are skipped, never
    built, so a few megabytes take milliseconds. Nesting beyond the decoder's recursion limit
    is refused here; nesting past `MAX_DEPTH` and text that is not UTF-8 are `decode_body`'s
    to find, in the worker.
    """
    try:
        _OBJECT_SYNTAX.decode(raw)
    except msgspec.ValidationError:
        raise EnvelopeError("not a JSON object") from None
    except msgspec.DecodeError as exc:
        raise EnvelopeError(f"not JSON: {exc}") from None
    except RecursionError:
        raise EnvelopeError(f"nested deeper than {MAX_DEPTH} levels") from None


_OBJECT_SYNTAX = msgspec.json.Decoder(dict[str, msgspec.Raw])


def _deeper_than(document: dict[str, Any], limit: int) -> bool:
    """Does any container sit more than `limit` levels down? One level at a time, with no
    recursion and no per-node generator: a body of many small entries walks in a fraction
    of the time a node-by-node stack takes."""
    level: list[Any] = [document]
    for _ in range(limit):
        below: list[Any] = []
        for node in level:
            values = node.values() if type(node) is dict else node
            below.extend([c for c in values if type(c) is dict or type(c) is list])
        if not below:
            return False
        level = below
    return True


def parse_webhook(document: Mapping[str, Any], *, received_at: datetime) -> ParsedWebhook:
    """Every item of a decoded webhook body; see the module docstring for what goes where."""
    obj = document.get("object")
    if obj != "instagram":
        raise EnvelopeError(f"unknown object {obj!r}; expected 'instagram'")
    entries = document.get("entry")
    if not isinstance(entries, list):
        raise EnvelopeError(f"'entry' is {fields.type_name(entries)}, expected a list")
    parsed = ParsedWebhook()
    for index, entry in enumerate(entries):
        _parse_entry(parsed, entry, f"entry[{index}]", received_at)
    return parsed


def comment_from_graph(
    account_ig_id: str,
    media_id: str,
    data: Mapping[str, Any],
    *,
    original_media_id: str | None = None,
    fallback_time: datetime,
) -> CommentItem:
    """A comment from `GET /{media-id}/comments` (id, text, timestamp, from, parent_id).

    Raises `ValueError` naming the field when the comment cannot be used.
    """
    try:
        comment_id = fields.required_id(data, "id", "comment")
        sender = fields.optional_mapping(data, "from", "comment")
        commenter_id = fields.optional_id(sender, "id", "comment.from") if sender else None
        username = fields.optional_str(sender, "username", "comment.from") if sender else None
        username = username or fields.optional_str(data, "username", "comment")
        timestamp = fields.optional_str(data, "timestamp", "comment")
    except fields.FieldError as bad:
        raise ValueError(f"{bad.path}: {bad.message}") from None
    return CommentItem(
        account_ig_id=account_ig_id,
        comment_id=comment_id,
        text=fields.clean(fields.optional_str(data, "text", "comment") or ""),
        commenter_id=commenter_id,
        commenter_username=fields.username(username),
        is_own=commenter_id == account_ig_id,
        media_id=media_id,
        original_media_id=original_media_id,
        media_product_type=None,
        parent_id=fields.optional_id(data, "parent_id", "comment"),
        commented_at=fields.parse_graph_time(timestamp) or fallback_time,
    )


# --- entries ------------------------------------------------------------------------------


def _parse_entry(parsed: ParsedWebhook, entry: object, path: str, received_at: datetime) -> None:
    if not isinstance(entry, dict):
        parsed.problem(path, f"entry is {fields.type_name(entry)}, expected an object")
        return
    try:
        account = fields.required_id(entry, "id", path)
    except fields.FieldError as bad:
        parsed.problem(bad.path, bad.message)
        return
    context = _Entry(account, entry.get("time"), received_at)
    known = False
    changes = entry.get("changes")
    if changes is not None:
        known = True
        if not isinstance(changes, list):
            parsed.problem(f"{path}.changes", f"is {fields.type_name(changes)}, expected a list")
        else:
            for index, change in enumerate(changes):
                _parse_change(parsed, context, change, f"{path}.changes[{index}]")
    messaging = entry.get("messaging")
    if messaging is not None:
        known = True
        if not isinstance(messaging, list):
            parsed.problem(
                f"{path}.messaging", f"is {fields.type_name(messaging)}, expected a list"
            )
        else:
            for index, item in enumerate(messaging):
                _parse_messaging_safely(parsed, context, item, f"{path}.messaging[{index}]")
    if "field" in entry:
        # The documented generic template: the change flattened into the entry.
        known = True
        _parse_change(parsed, context, entry, path)
    for other in ("standby", "hop_context"):
        items = entry.get(other)
        if items is not None:
            known = True
            for _ in items if isinstance(items, list) else [items]:
                parsed.ignore(other)
    if not known:
        parsed.ignore("entry_without_items")


def _parse_change(parsed: ParsedWebhook, context: _Entry, change: object, path: str) -> None:
    if not isinstance(change, dict):
        parsed.problem(path, f"change is {fields.type_name(change)}, expected an object")
        return
    name = change.get("field")
    if not isinstance(name, str):
        parsed.problem(f"{path}.field", f"is {fields.type_name(name)}, expected a string")
        return
    value = change.get("value")
    if name in COMMENT_FIELDS:
        try:
            comment = _comment(context, name, value, f"{path}.value")
        except fields.FieldError as bad:
            parsed.problem(bad.path, bad.message)
            return
        parsed.comments.append(comment)
    elif name in MESSAGING_FIELDS:
        # Test deliveries carry the messaging item as the value; its times are milliseconds.
        _parse_messaging_safely(parsed, context, value, f"{path}.value")
    else:
        parsed.ignore(fields.bounded_name(name))


def _comment(context: _Entry, name: str, value: object, path: str) -> CommentItem:
    if not isinstance(value, dict):
        raise fields.FieldError(path, f"is {fields.type_name(value)}, expected an object")
    # Facebook-Login deliveries name the comment id `comment_id`.
    comment_id = fields.optional_id(value, "id", path) or fields.optional_id(
        value, "comment_id", path
    )
    if comment_id is None:
        raise fields.FieldError(f"{path}.id", "is missing")
    sender = fields.optional_mapping(value, "from", path)
    commenter_id = fields.optional_id(sender, "id", f"{path}.from") if sender else None
    username = fields.optional_str(sender, "username", f"{path}.from") if sender else None
    media = fields.optional_mapping(value, "media", path)
    if media:
        media_id = fields.optional_id(media, "id", f"{path}.media")
        original = fields.optional_id(media, "original_media_id", f"{path}.media")
        product = fields.optional_str(media, "media_product_type", f"{path}.media")
    else:
        media_id, original, product = None, None, None
    media_id = media_id or fields.optional_id(value, "media_id", path)
    account = context.account
    return CommentItem(
        account_ig_id=account,
        comment_id=comment_id,
        text=fields.clean(fields.optional_str(value, "text", path) or ""),
        commenter_id=commenter_id,
        commenter_username=fields.username(username),
        # The account's own comments (its public replies too) come from the entry's account.
        # `from.self_ig_scoped_id` is no sign of that: Meta lists it among every comment's
        # fields, and a fan's comment may carry it.
        is_own=commenter_id == account,
        media_id=media_id,
        original_media_id=original,
        media_product_type=product[:32] if product else None,
        parent_id=fields.optional_id(value, "parent_id", path),
        commented_at=fields.entry_instant(context.time, context.received_at),
        field=name,
    )


# --- messaging ----------------------------------------------------------------------------


def _parse_messaging_safely(
    parsed: ParsedWebhook, context: _Entry, item: object, path: str
) -> None:
    try:
        message = _messaging(context, item, path)
    except fields.FieldError as bad:
        parsed.problem(bad.path, bad.message)
        return
    if isinstance(message, str):
        parsed.ignore(message)
    else:
        parsed.messaging.append(message)


def _messaging(context: _Entry, item: object, path: str) -> MessagingItem | str:
    """The item, or the name of the kind we ignore."""
    if not isinstance(item, dict):
        raise fields.FieldError(path, f"is {fields.type_name(item)}, expected an object")
    sender_map = fields.optional_mapping(item, "sender", path)
    recipient_map = fields.optional_mapping(item, "recipient", path)
    sender = fields.optional_id(sender_map, "id", f"{path}.sender") if sender_map else None
    recipient = (
        fields.optional_id(recipient_map, "id", f"{path}.recipient") if recipient_map else None
    )
    account = context.account
    occurred_at = _messaging_instant(item.get("timestamp"), context)

    if "message" in item:
        body = fields.required_mapping(item, "message", path)
        mid = fields.optional_mid(body, "mid", f"{path}.message")
        text = fields.optional_str(body, "text", f"{path}.message")
        is_echo = body.get("is_echo") is True
        quick_reply = fields.optional_mapping(body, "quick_reply", f"{path}.message")
        payload = (
            fields.optional_str(quick_reply, "payload", f"{path}.message.quick_reply")
            if quick_reply
            else None
        )
        story = None if is_echo else _story_of(body, f"{path}.message")
        return MessagingItem(
            account_ig_id=account,
            occurred_at=occurred_at,
            kind=MessagingKind.ECHO if is_echo else MessagingKind.MESSAGE,
            user_id=recipient if is_echo else sender,
            mid=mid,
            text=fields.clean(text) if text is not None else None,
            payload=fields.payload_text(payload),
            is_deleted=body.get("is_deleted") is True,
            is_unsupported=body.get("is_unsupported") is True,
            is_self=not is_echo and (body.get("is_self") is True or sender == account),
            extra=_message_extra(body, story),
            story=story,
        )
    for name, (kind, mid_field, text_field, payload_field) in _OTHER_KINDS.items():
        if name in item:
            body = fields.required_mapping(item, name, path)
            where = f"{path}.{name}"
            text = fields.optional_str(body, text_field, where) if text_field else None
            return MessagingItem(
                account_ig_id=account,
                occurred_at=occurred_at,
                kind=kind,
                user_id=sender,
                mid=fields.optional_mid(body, mid_field, where) if mid_field else None,
                text=fields.clean_optional(text),
                payload=fields.payload_text(fields.optional_str(body, payload_field, where))
                if payload_field
                else None,
                is_self=sender == account,
                extra=_other_extra(name, body),
            )
    for name in item:
        if name not in {"sender", "recipient", "timestamp"}:
            return f"messaging.{fields.bounded_name(name)}"
    return "messaging.empty"


# The item key of each other messaging kind, and where its mid, text and payload are.
_OTHER_KINDS: dict[str, tuple[MessagingKind, str | None, str | None, str | None]] = {
    "postback": (MessagingKind.POSTBACK, "mid", "title", "payload"),
    "reaction": (MessagingKind.REACTION, "mid", "emoji", "reaction"),
    "read": (MessagingKind.READ, "mid", None, None),
    "referral": (MessagingKind.REFERRAL, None, None, "ref"),
    "message_edit": (MessagingKind.EDIT, "mid", "text", None),
    "optin": (MessagingKind.OPTIN, None, None, "payload"),
}


def _other_extra(name: str, body: Mapping[str, Any]) -> dict[str, Any]:
    if name == "reaction":
        action = body.get("action")
        return {"action": action[:16] if isinstance(action, str) and action else "react"}
    if name == "referral":
        return fields.strings(body, ("source", "type"))
    if name == "message_edit" and isinstance(body.get("num_edit"), int):
        return {"num_edit": body["num_edit"]}
    return {}


# Story URLs are signed CDN links; a longer one is kept cut, never refused.
MAX_STORY_URL = 1000


def _story_of(body: Mapping[str, Any], path: str) -> StoryRef | None:
    """The story a message replies to or that mentions the account, if any. Lenient: an
    odd story field loses the story's details, never the person's message."""
    reply_to = body.get("reply_to")
    story = reply_to.get("story") if isinstance(reply_to, dict) else None
    if isinstance(story, dict):
        try:
            story_id = fields.optional_id(story, "id", f"{path}.reply_to.story")
        except fields.FieldError:
            story_id = None
        url = story.get("url")
        url = fields.clean(url[:MAX_STORY_URL]) if isinstance(url, str) and url else None
        return StoryRef(StoryAction.REPLY, story_id, url)
    attachments = body.get("attachments")
    if isinstance(attachments, list):
        for attachment in attachments:
            if isinstance(attachment, dict) and attachment.get("type") == "story_mention":
                payload = attachment.get("payload")
                url = payload.get("url") if isinstance(payload, dict) else None
                url = fields.clean(url[:MAX_STORY_URL]) if isinstance(url, str) and url else None
                return StoryRef(StoryAction.MENTION, None, url)
    return None


def _message_extra(body: Mapping[str, Any], story: StoryRef | None) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    attachments = body.get("attachments")
    if isinstance(attachments, list):
        kinds = [
            a["type"][:32]
            for a in attachments
            if isinstance(a, dict) and isinstance(a.get("type"), str)
        ]
        extra["attachments"] = [fields.clean(kind) for kind in kinds[:10]]
    reply_to = body.get("reply_to")
    if isinstance(reply_to, dict) and isinstance(reply_to.get("mid"), str):
        extra["reply_to_mid"] = fields.clean(reply_to["mid"][: fields.MAX_MID_LENGTH])
    if story is not None:
        extra["story"] = story.action.value
        if story.story_id:
            extra["story_id"] = story.story_id
        if story.url:
            extra["story_url"] = story.url
    return extra


def _messaging_instant(raw: object, context: _Entry) -> datetime:
    if isinstance(raw, (int, float)) and not isinstance(raw, bool):
        return fields.entry_instant(raw, context.received_at)
    return fields.entry_instant(context.time, context.received_at)
