"""Typed parse of a webhook body into the items we act on, plus everything we could not use.

Pure functions, no I/O. `decode_body` turns raw bytes into a JSON object (or refuses them);
`parse_webhook` walks the whole envelope and returns:

- `comments`: one `CommentItem` per `comments`/`live_comments` change, in either shape Meta
  uses — `entry[].changes[]` or the flat `entry[].field/value`;
- `messaging`: one `MessagingItem` per `entry[].messaging[]` item (messages, echoes,
  postbacks, reactions, reads, referrals, edits), also when one arrives in the changes shape
  (Meta's dashboard "Test" button sends `{"field": "messages", "value": {...}}`);
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
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

import msgspec

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
# Column sizes in the ledger: a longer value would fail the whole batch's INSERT.
MAX_ID_LENGTH = 32
MAX_MID_LENGTH = 255
MAX_USERNAME_LENGTH = 64
MAX_PAYLOAD_LENGTH = 2000
# Problems kept per event; the count is always exact.
MAX_PROBLEMS_KEPT = 50
# An `entry.time` further than this from our clock is not trusted as the comment time.
_MAX_CLOCK_SKEW = timedelta(minutes=10)
_MAX_EVENT_AGE = timedelta(days=8)


class EnvelopeError(ValueError):
    """The body as a whole cannot be processed; the message says why."""


class MessagingKind(StrEnum):
    MESSAGE = "message"
    ECHO = "echo"
    POSTBACK = "postback"
    REACTION = "reaction"
    READ = "read"
    REFERRAL = "referral"
    EDIT = "edit"
    OPTIN = "optin"


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


class _ItemError(Exception):
    """One item is malformed; carries the path of the offending value."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message


def decode_body(raw: bytes) -> dict[str, Any]:
    """Parse `raw` as a JSON object; `EnvelopeError` says why it is not one."""
    try:
        document = msgspec.json.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise EnvelopeError(f"not JSON: {exc}") from None
    if not isinstance(document, dict):
        raise EnvelopeError(f"not a JSON object but {_type_name(document)}")
    return document


def parse_webhook(document: Mapping[str, Any], *, received_at: datetime) -> ParsedWebhook:
    """Every item of a decoded webhook body; see the module docstring for what goes where."""
    obj = document.get("object")
    if obj != "instagram":
        raise EnvelopeError(f"unknown object {obj!r}; expected 'instagram'")
    entries = document.get("entry")
    if not isinstance(entries, list):
        raise EnvelopeError(f"'entry' is {_type_name(entries)}, expected a list")
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
        comment_id = _required_id(data, "id", "comment")
        sender = _optional_mapping(data, "from", "comment")
        commenter_id = _optional_id(sender, "id", "comment.from") if sender else None
        username = _optional_str(sender, "username", "comment.from") if sender else None
        username = username or _optional_str(data, "username", "comment")
        timestamp = _optional_str(data, "timestamp", "comment")
    except _ItemError as bad:
        raise ValueError(f"{bad.path}: {bad.message}") from None
    return CommentItem(
        account_ig_id=account_ig_id,
        comment_id=comment_id,
        text=_clean(_optional_str(data, "text", "comment") or ""),
        commenter_id=commenter_id,
        commenter_username=_username(username),
        is_own=commenter_id == account_ig_id,
        media_id=media_id,
        original_media_id=original_media_id,
        media_product_type=None,
        parent_id=_optional_id(data, "parent_id", "comment"),
        commented_at=_parse_graph_time(timestamp) or fallback_time,
    )


# --- entries ------------------------------------------------------------------------------


def _parse_entry(parsed: ParsedWebhook, entry: object, path: str, received_at: datetime) -> None:
    if not isinstance(entry, dict):
        parsed.problem(path, f"entry is {_type_name(entry)}, expected an object")
        return
    try:
        account = _required_id(entry, "id", path)
    except _ItemError as bad:
        parsed.problem(bad.path, bad.message)
        return
    context = _Entry(account, entry.get("time"), received_at)
    known = False
    changes = entry.get("changes")
    if changes is not None:
        known = True
        if not isinstance(changes, list):
            parsed.problem(f"{path}.changes", f"is {_type_name(changes)}, expected a list")
        else:
            for index, change in enumerate(changes):
                _parse_change(parsed, context, change, f"{path}.changes[{index}]")
    messaging = entry.get("messaging")
    if messaging is not None:
        known = True
        if not isinstance(messaging, list):
            parsed.problem(f"{path}.messaging", f"is {_type_name(messaging)}, expected a list")
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
        parsed.problem(path, f"change is {_type_name(change)}, expected an object")
        return
    name = change.get("field")
    if not isinstance(name, str):
        parsed.problem(f"{path}.field", f"is {_type_name(name)}, expected a string")
        return
    value = change.get("value")
    if name in COMMENT_FIELDS:
        try:
            comment = _comment(context, name, value, f"{path}.value")
        except _ItemError as bad:
            parsed.problem(bad.path, bad.message)
            return
        parsed.comments.append(comment)
    elif name in MESSAGING_FIELDS:
        # Test deliveries carry the messaging item as the value; its times are milliseconds.
        _parse_messaging_safely(parsed, context, value, f"{path}.value")
    else:
        parsed.ignore(_bounded_name(name))


def _comment(context: _Entry, name: str, value: object, path: str) -> CommentItem:
    if not isinstance(value, dict):
        raise _ItemError(path, f"is {_type_name(value)}, expected an object")
    # Facebook-Login deliveries name the comment id `comment_id`.
    comment_id = _optional_id(value, "id", path) or _optional_id(value, "comment_id", path)
    if comment_id is None:
        raise _ItemError(f"{path}.id", "is missing")
    sender = _optional_mapping(value, "from", path)
    commenter_id = _optional_id(sender, "id", f"{path}.from") if sender else None
    username = _optional_str(sender, "username", f"{path}.from") if sender else None
    self_scoped = _optional_id(sender, "self_ig_scoped_id", f"{path}.from") if sender else None
    media = _optional_mapping(value, "media", path)
    if media:
        media_id = _optional_id(media, "id", f"{path}.media")
        original = _optional_id(media, "original_media_id", f"{path}.media")
        product = _optional_str(media, "media_product_type", f"{path}.media")
    else:
        media_id, original, product = None, None, None
    media_id = media_id or _optional_id(value, "media_id", path)
    account = context.account
    return CommentItem(
        account_ig_id=account,
        comment_id=comment_id,
        text=_clean(_optional_str(value, "text", path) or ""),
        commenter_id=commenter_id,
        commenter_username=_username(username),
        is_own=commenter_id == account or self_scoped is not None,
        media_id=media_id,
        original_media_id=original,
        media_product_type=product[:32] if product else None,
        parent_id=_optional_id(value, "parent_id", path),
        commented_at=_entry_instant(context.time, context.received_at),
        field=name,
    )


# --- messaging ----------------------------------------------------------------------------


def _parse_messaging_safely(
    parsed: ParsedWebhook, context: _Entry, item: object, path: str
) -> None:
    try:
        message = _messaging(context, item, path)
    except _ItemError as bad:
        parsed.problem(bad.path, bad.message)
        return
    if isinstance(message, str):
        parsed.ignore(message)
    else:
        parsed.messaging.append(message)


def _messaging(context: _Entry, item: object, path: str) -> MessagingItem | str:
    """The item, or the name of the kind we ignore."""
    if not isinstance(item, dict):
        raise _ItemError(path, f"is {_type_name(item)}, expected an object")
    sender_map = _optional_mapping(item, "sender", path)
    recipient_map = _optional_mapping(item, "recipient", path)
    sender = _optional_id(sender_map, "id", f"{path}.sender") if sender_map else None
    recipient = _optional_id(recipient_map, "id", f"{path}.recipient") if recipient_map else None
    account = context.account
    occurred_at = _messaging_instant(item.get("timestamp"), context)

    if "message" in item:
        body = _required_mapping(item, "message", path)
        mid = _optional_mid(body, "mid", f"{path}.message")
        text = _optional_str(body, "text", f"{path}.message")
        is_echo = body.get("is_echo") is True
        quick_reply = _optional_mapping(body, "quick_reply", f"{path}.message")
        payload = (
            _optional_str(quick_reply, "payload", f"{path}.message.quick_reply")
            if quick_reply
            else None
        )
        return MessagingItem(
            account_ig_id=account,
            occurred_at=occurred_at,
            kind=MessagingKind.ECHO if is_echo else MessagingKind.MESSAGE,
            user_id=recipient if is_echo else sender,
            mid=mid,
            text=_clean(text) if text is not None else None,
            payload=_payload(payload),
            is_deleted=body.get("is_deleted") is True,
            is_unsupported=body.get("is_unsupported") is True,
            is_self=not is_echo and (body.get("is_self") is True or sender == account),
            extra=_message_extra(body),
        )
    if "postback" in item:
        body = _required_mapping(item, "postback", path)
        return MessagingItem(
            account_ig_id=account,
            occurred_at=occurred_at,
            kind=MessagingKind.POSTBACK,
            user_id=sender,
            mid=_optional_mid(body, "mid", f"{path}.postback"),
            text=_clean_optional(_optional_str(body, "title", f"{path}.postback")),
            payload=_payload(_optional_str(body, "payload", f"{path}.postback")),
            is_self=sender == account,
        )
    if "reaction" in item:
        body = _required_mapping(item, "reaction", path)
        action = _optional_str(body, "action", f"{path}.reaction") or "react"
        return MessagingItem(
            account_ig_id=account,
            occurred_at=occurred_at,
            kind=MessagingKind.REACTION,
            user_id=sender,
            mid=_optional_mid(body, "mid", f"{path}.reaction"),
            text=_clean_optional(_optional_str(body, "emoji", f"{path}.reaction")),
            payload=_payload(_optional_str(body, "reaction", f"{path}.reaction")),
            is_self=sender == account,
            extra={"action": action[:16]},
        )
    if "read" in item:
        body = _required_mapping(item, "read", path)
        return MessagingItem(
            account_ig_id=account,
            occurred_at=occurred_at,
            kind=MessagingKind.READ,
            user_id=sender,
            mid=_optional_mid(body, "mid", f"{path}.read"),
            text=None,
            payload=None,
            is_self=sender == account,
        )
    if "referral" in item:
        body = _required_mapping(item, "referral", path)
        return MessagingItem(
            account_ig_id=account,
            occurred_at=occurred_at,
            kind=MessagingKind.REFERRAL,
            user_id=sender,
            mid=None,
            text=None,
            payload=_payload(_optional_str(body, "ref", f"{path}.referral")),
            is_self=sender == account,
            extra=_strings(body, ("source", "type")),
        )
    if "message_edit" in item:
        body = _required_mapping(item, "message_edit", path)
        edits = body.get("num_edit")
        return MessagingItem(
            account_ig_id=account,
            occurred_at=occurred_at,
            kind=MessagingKind.EDIT,
            user_id=sender,
            mid=_optional_mid(body, "mid", f"{path}.message_edit"),
            text=_clean_optional(_optional_str(body, "text", f"{path}.message_edit")),
            payload=None,
            is_self=sender == account,
            extra={"num_edit": edits} if isinstance(edits, int) else {},
        )
    if "optin" in item:
        body = _required_mapping(item, "optin", path)
        return MessagingItem(
            account_ig_id=account,
            occurred_at=occurred_at,
            kind=MessagingKind.OPTIN,
            user_id=sender,
            mid=None,
            text=None,
            payload=_payload(_optional_str(body, "payload", f"{path}.optin")),
            is_self=sender == account,
        )
    for name in item:
        if name not in {"sender", "recipient", "timestamp"}:
            return f"messaging.{_bounded_name(name)}"
    return "messaging.empty"


def _message_extra(body: Mapping[str, Any]) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    attachments = body.get("attachments")
    if isinstance(attachments, list):
        kinds = [
            a["type"][:32]
            for a in attachments
            if isinstance(a, dict) and isinstance(a.get("type"), str)
        ]
        extra["attachments"] = [_clean(kind) for kind in kinds[:10]]
    reply_to = body.get("reply_to")
    if isinstance(reply_to, dict):
        if isinstance(reply_to.get("mid"), str):
            extra["reply_to_mid"] = _clean(reply_to["mid"][:MAX_MID_LENGTH])
        elif isinstance(reply_to.get("story"), dict):
            extra["reply_to_story"] = True
    return extra


def _strings(body: Mapping[str, Any], names: tuple[str, ...]) -> dict[str, str]:
    return {n: _clean(body[n][:64]) for n in names if isinstance(body.get(n), str)}


# --- field readers ------------------------------------------------------------------------


def _required_id(container: Mapping[str, Any], name: str, path: str) -> str:
    value = _optional_id(container, name, path)
    if value is None:
        raise _ItemError(f"{path}.{name}", "is missing")
    return value


def _optional_id(container: Mapping[str, Any], name: str, path: str) -> str | None:
    return _id_value(container.get(name), f"{path}.{name}", MAX_ID_LENGTH)


def _optional_mid(container: Mapping[str, Any], name: str, path: str) -> str | None:
    return _id_value(container.get(name), f"{path}.{name}", MAX_MID_LENGTH)


def _id_value(value: object, path: str, max_length: int) -> str | None:
    if value is None:
        return None
    # Ids are strings in every documented payload; some senders emit them as numbers.
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise _ItemError(path, f"is {_type_name(value)}, expected a string id")
    value = _clean(value).strip()
    if not value:
        return None
    if len(value) > max_length:
        raise _ItemError(path, f"is {len(value)} characters long, at most {max_length} expected")
    return value


def _optional_str(container: Mapping[str, Any], name: str, path: str) -> str | None:
    value = container.get(name)
    if value is None or isinstance(value, str):
        return value
    raise _ItemError(f"{path}.{name}", f"is {_type_name(value)}, expected a string")


def _optional_mapping(container: Mapping[str, Any], name: str, path: str) -> dict[str, Any] | None:
    value = container.get(name)
    if value is None or isinstance(value, dict):
        return value
    raise _ItemError(f"{path}.{name}", f"is {_type_name(value)}, expected an object")


def _required_mapping(container: Mapping[str, Any], name: str, path: str) -> dict[str, Any]:
    value = _optional_mapping(container, name, path)
    if value is None:
        raise _ItemError(f"{path}.{name}", "is missing")
    return value


def _clean(text: str) -> str:
    # PostgreSQL text and JSONB cannot hold NUL; everything else is kept as sent.
    return text.replace("\x00", "") if "\x00" in text else text


def _clean_optional(text: str | None) -> str | None:
    return _clean(text) if text is not None else None


def _username(value: str | None) -> str | None:
    if not value:
        return None
    return _clean(value).strip()[:MAX_USERNAME_LENGTH] or None


def _payload(value: str | None) -> str | None:
    return _clean(value)[:MAX_PAYLOAD_LENGTH] if value is not None else None


def _bounded_name(name: str) -> str:
    return _clean(name)[:64]


def _type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


# --- time ---------------------------------------------------------------------------------


def _entry_instant(raw: object, received_at: datetime) -> datetime:
    """`entry.time` when it is a plausible instant, else when we received the event.

    Comment events carry no comment timestamp; `entry.time` is the best we have, and it
    survives Meta's redeliveries, unlike our receive time. It is in seconds for changes and in
    milliseconds for messaging; the magnitude tells them apart (1e11 s is the year 5138).
    """
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        return received_at
    seconds = raw / 1000 if raw > 100_000_000_000 else raw
    try:
        instant = datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, OSError, ValueError):
        return received_at
    if received_at - _MAX_EVENT_AGE <= instant <= received_at + _MAX_CLOCK_SKEW:
        return instant
    return received_at


def _messaging_instant(raw: object, context: _Entry) -> datetime:
    if isinstance(raw, (int, float)) and not isinstance(raw, bool):
        return _entry_instant(raw, context.received_at)
    return _entry_instant(context.time, context.received_at)


def _parse_graph_time(raw: str | None) -> datetime | None:
    """Graph timestamps look like `2025-06-01T12:05:02+0000`."""
    if not raw:
        return None
    try:
        parsed = datetime.strptime(raw, "%Y-%m-%dT%H:%M:%S%z")
    except ValueError:
        try:
            parsed = datetime.fromisoformat(raw)
        except ValueError:
            return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)
