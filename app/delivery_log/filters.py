"""What the log's URL says: filters, the keyset cursor, and the live window of the first page.

Filters live in the query string, so a filtered view can be bookmarked, shared and restored
from history. Values that do not parse are dropped with a sentence saying so (`problems`),
never an error page. Dates are whole days in UTC.

`Key` is a row's place in the log's order, `(created_at, id)` newest first; in a URL it is an
opaque url-safe token of the exact microsecond timestamp and the id, so paging is stable no
matter how many rows arrive meanwhile.

`LiveWindow` is what the first page's poller remembers between polls: a floor key and the
rows it already shows above that floor. Rows get `created_at = now()` of the transaction that
wrote them, and transactions commit out of order, so "newer than the newest row shown" could
miss a row that committed a moment late with a slightly older timestamp. The poller instead
asks for rows above the floor that it does not show yet, with the floor trailing the newest
row by `LIVE_OVERLAP`.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

from app.db.bounds import BIGINT_MAX, MAX_MICROS, MIN_MICROS, parse_day, parse_id
from app.db.models import LegState, MissReason, TriggerKind

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
# How long a transaction may take between stamping its rows and committing them.
LIVE_OVERLAP = timedelta(seconds=10)
# A live window never remembers more rows than this (older ones fall below the floor).
LIVE_MAX_SHOWN = 300
MAX_QUERY_LENGTH = 100
SKIPPED = "SKIPPED"  # the state filter for any SKIPPED_* state


def to_micros(value: datetime) -> int:
    return (value - _EPOCH) // _MICROSECOND


def from_micros(value: int) -> datetime:
    return _EPOCH + value * _MICROSECOND


def _b64(data: str) -> str:
    return base64.urlsafe_b64encode(data.encode()).decode().rstrip("=")


def _unb64(token: str) -> str:
    return base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()


@dataclass(frozen=True, slots=True, order=True)
class Key:
    """A row's place in the log: ordered like `(created_at, id)`."""

    micros: int
    id: int

    @classmethod
    def of(cls, created_at: datetime, row_id: int) -> Key:
        return cls(to_micros(created_at), row_id)

    @property
    def created_at(self) -> datetime:
        return from_micros(self.micros)

    def encode(self) -> str:
        return _b64(f"{self.micros}.{self.id}")

    @classmethod
    def decode(cls, token: str | None) -> Key | None:
        if not token:
            return None
        try:
            micros, _, row_id = _unb64(token).partition(".")
            return cls.checked(int(micros), int(row_id))
        except (ValueError, binascii.Error, UnicodeDecodeError):
            return None

    @classmethod
    def checked(cls, micros: object, row_id: object) -> Key:
        """A key from a URL: integers a timestamp and a `bigint` can hold, or an error."""
        if not isinstance(micros, int) or not isinstance(row_id, int):
            raise TypeError("a key is two integers")
        if not MIN_MICROS <= micros <= MAX_MICROS or not 0 <= row_id <= BIGINT_MAX:
            raise ValueError("a key out of range")
        return cls(micros, row_id)


@dataclass(frozen=True, slots=True)
class LiveWindow:
    floor: Key
    shown: tuple[Key, ...] = ()

    @classmethod
    def start(cls, rows: list[Key], *, page_full: bool) -> LiveWindow:
        """The window for a first page showing `rows` (newest first)."""
        if not rows:
            return cls(Key(0, 0))
        floor = Key(to_micros(rows[0].created_at - LIVE_OVERLAP), 0)
        if page_full:
            # Rows below the page's last one belong to the next page, not to "new".
            floor = max(floor, rows[-1])
        return cls(floor, tuple(key for key in rows if key > floor))

    def advance(self, new: list[Key]) -> LiveWindow:
        """The window after `new` rows were added to the page."""
        known = sorted({*self.shown, *new}, reverse=True)
        if not known:
            return self
        floor = max(self.floor, Key(to_micros(known[0].created_at - LIVE_OVERLAP), 0))
        above = [key for key in known if key > floor]
        if len(above) > LIVE_MAX_SHOWN:
            floor, above = above[LIVE_MAX_SHOWN - 1], above[: LIVE_MAX_SHOWN - 1]
        return LiveWindow(floor, tuple(above))

    def encode(self) -> str:
        body = [[self.floor.micros, self.floor.id], [[k.micros, k.id] for k in self.shown]]
        return _b64(json.dumps(body, separators=(",", ":")))

    @classmethod
    def decode(cls, token: str | None) -> LiveWindow | None:
        if not token:
            return None
        try:
            floor, shown = json.loads(_unb64(token))
            return cls(
                Key.checked(floor[0], floor[1]),
                tuple(Key.checked(m, i) for m, i in shown[:LIVE_MAX_SHOWN]),
            )
        except (
            ValueError,
            TypeError,
            IndexError,
            RecursionError,
            binascii.Error,
            UnicodeDecodeError,
        ):
            return None


def _int(params: Mapping[str, str], name: str, problems: list[str]) -> int | None:
    raw = (params.get(name) or "").strip()
    if not raw:
        return None
    value = parse_id(raw)
    if value is None:
        problems.append(f"Ignored {name} “{raw[:20]}”: not a number.")
    return value


def _day(params: Mapping[str, str], name: str, problems: list[str]) -> date | None:
    raw = (params.get(name) or "").strip()
    if not raw:
        return None
    day = parse_day(raw)
    if day is None:
        problems.append(f"Ignored the date “{raw[:20]}”: use YYYY-MM-DD.")
    return day


@dataclass(frozen=True, slots=True)
class CommonFilter:
    account_id: int | None = None
    q: str = ""
    date_from: date | None = None
    date_to: date | None = None
    problems: tuple[str, ...] = field(default=(), compare=False)

    @property
    def since(self) -> datetime | None:
        return (
            datetime.combine(self.date_from, datetime.min.time(), UTC) if self.date_from else None
        )

    @property
    def until(self) -> datetime | None:
        """Exclusive end: the day after `date_to`, at midnight UTC."""
        if self.date_to is None:
            return None
        return datetime.combine(self.date_to + timedelta(days=1), datetime.min.time(), UTC)

    @property
    def username_only(self) -> bool:
        return self.q.startswith("@")

    @property
    def needle(self) -> str:
        """The search text without a leading @, for a LIKE pattern."""
        return self.q.removeprefix("@").strip()

    def _common_items(self) -> list[tuple[str, str]]:
        items: list[tuple[str, str]] = []
        if self.account_id is not None:
            items.append(("account", str(self.account_id)))
        if self.q:
            items.append(("q", self.q))
        if self.date_from:
            items.append(("from", self.date_from.isoformat()))
        if self.date_to:
            items.append(("to", self.date_to.isoformat()))
        return items


def _common(params: Mapping[str, str], problems: list[str]) -> dict[str, Any]:
    return {
        "account_id": _int(params, "account", problems),
        "q": " ".join((params.get("q") or "").split())[:MAX_QUERY_LENGTH],
        "date_from": _day(params, "from", problems),
        "date_to": _day(params, "to", problems),
    }


@dataclass(frozen=True, slots=True)
class LogFilter(CommonFilter):
    """The delivery log's filters; `state` is the private-reply (DM) state, `trigger` what
    started the delivery (a comment, a story reply, …)."""

    state: str | None = None
    campaign_id: int | None = None
    trigger: TriggerKind | None = None

    @classmethod
    def parse(cls, params: Mapping[str, str]) -> LogFilter:
        problems: list[str] = []
        raw_state = (params.get("state") or "").strip().upper()
        state = None
        if raw_state in LegState.__members__ or raw_state == SKIPPED:
            state = raw_state
        elif raw_state:
            problems.append(f"Ignored the state “{raw_state[:30]}”.")
        campaign_id = _int(params, "campaign", problems)
        raw_trigger = (params.get("trigger") or "").strip()
        trigger = None
        if raw_trigger in {kind.value for kind in TriggerKind}:
            trigger = TriggerKind(raw_trigger)
        elif raw_trigger:
            problems.append(f"Ignored the trigger “{raw_trigger[:30]}”.")
        common = _common(params, problems)
        return cls(
            state=state,
            campaign_id=campaign_id,
            trigger=trigger,
            problems=tuple(problems),
            **common,
        )

    def items(self) -> list[tuple[str, str]]:
        """The filters as query-string pairs (for links, the poller and the export)."""
        items = [("state", self.state)] if self.state else []
        if self.campaign_id is not None:
            items.append(("campaign", str(self.campaign_id)))
        if self.trigger is not None:
            items.append(("trigger", self.trigger.value))
        return items + self._common_items()

    @property
    def states(self) -> tuple[LegState, ...]:
        if self.state == SKIPPED:
            return tuple(state for state in LegState if state.is_skip)
        return (LegState(self.state),) if self.state else ()


@dataclass(frozen=True, slots=True)
class MissFilter(CommonFilter):
    """The misses view's filters: comments (why one did not trigger) or, with `kind`
    "stories", story replies and mentions; plus the common ones."""

    reason: MissReason | None = None
    stories: bool = False

    @classmethod
    def parse(cls, params: Mapping[str, str]) -> MissFilter:
        problems: list[str] = []
        raw = (params.get("reason") or "").strip()
        reason = None
        if raw in {r.value for r in MissReason}:
            reason = MissReason(raw)
        elif raw:
            problems.append(f"Ignored the reason “{raw[:30]}”.")
        kind = (params.get("kind") or "").strip()
        if kind not in {"", "comments", "stories"}:
            problems.append(f"Ignored the kind “{kind[:30]}”.")
        common = _common(params, problems)
        stories = kind == "stories"
        return cls(
            reason=None if stories else reason,
            stories=stories,
            problems=tuple(problems),
            **common,
        )

    def items(self) -> list[tuple[str, str]]:
        items = [("kind", "stories")] if self.stories else []
        if self.reason:
            items.append(("reason", self.reason.value))
        return items + self._common_items()
