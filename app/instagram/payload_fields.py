"""Typed readers for the untrusted JSON of webhook and Graph payloads.

Each reader returns the value in the shape the ledger stores (ids as strings no longer than
their column, text without NUL, usernames trimmed) or raises `FieldError` with the JSON path
of the offending value, so the caller can record one problem per bad item and go on.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

# Column sizes in the ledger: a longer value would fail the whole batch's INSERT.
MAX_ID_LENGTH = 32
MAX_MID_LENGTH = 255
MAX_USERNAME_LENGTH = 64
MAX_PAYLOAD_LENGTH = 2000
# An `entry.time` further than this from our clock is not trusted as the comment time.
_MAX_CLOCK_SKEW = timedelta(minutes=10)
_MAX_EVENT_AGE = timedelta(days=8)


class FieldError(Exception):
    """One item is malformed; carries the path of the offending value."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message


# --- field readers ------------------------------------------------------------------------


def required_id(container: Mapping[str, Any], name: str, path: str) -> str:
    value = optional_id(container, name, path)
    if value is None:
        raise FieldError(f"{path}.{name}", "is missing")
    return value


def optional_id(container: Mapping[str, Any], name: str, path: str) -> str | None:
    return id_value(container.get(name), f"{path}.{name}", MAX_ID_LENGTH)


def optional_mid(container: Mapping[str, Any], name: str, path: str) -> str | None:
    return id_value(container.get(name), f"{path}.{name}", MAX_MID_LENGTH)


def id_value(value: object, path: str, max_length: int) -> str | None:
    if value is None:
        return None
    # Ids are strings in every documented payload; some senders emit them as numbers.
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise FieldError(path, f"is {type_name(value)}, expected a string id")
    value = clean(value).strip()
    if not value:
        return None
    if len(value) > max_length:
        raise FieldError(path, f"is {len(value)} characters long, at most {max_length} expected")
    return value


def optional_str(container: Mapping[str, Any], name: str, path: str) -> str | None:
    value = container.get(name)
    if value is None or isinstance(value, str):
        return value
    raise FieldError(f"{path}.{name}", f"is {type_name(value)}, expected a string")


def optional_mapping(container: Mapping[str, Any], name: str, path: str) -> dict[str, Any] | None:
    value = container.get(name)
    if value is None or isinstance(value, dict):
        return value
    raise FieldError(f"{path}.{name}", f"is {type_name(value)}, expected an object")


def required_mapping(container: Mapping[str, Any], name: str, path: str) -> dict[str, Any]:
    value = optional_mapping(container, name, path)
    if value is None:
        raise FieldError(f"{path}.{name}", "is missing")
    return value


def clean(text: str) -> str:
    # PostgreSQL text and JSONB cannot hold NUL; everything else is kept as sent.
    return text.replace("\x00", "") if "\x00" in text else text


def clean_optional(text: str | None) -> str | None:
    return clean(text) if text is not None else None


def username(value: str | None) -> str | None:
    if not value:
        return None
    return clean(value).strip()[:MAX_USERNAME_LENGTH] or None


def payload_text(value: str | None) -> str | None:
    return clean(value)[:MAX_PAYLOAD_LENGTH] if value is not None else None


def bounded_name(name: str) -> str:
    return clean(name)[:64]


def type_name(value: object) -> str:
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


def strings(body: Mapping[str, Any], names: tuple[str, ...]) -> dict[str, str]:
    return {n: clean(body[n][:64]) for n in names if isinstance(body.get(n), str)}


# --- time ---------------------------------------------------------------------------------


def entry_instant(raw: object, received_at: datetime) -> datetime:
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


def parse_graph_time(raw: str | None) -> datetime | None:
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
