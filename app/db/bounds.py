"""Values from outside, parsed into the ranges the database and Python can hold.

Every id, number and day a request carries (a path, a query string, a form) goes through
these before any query: an id past PostgreSQL's `bigint`, a digit Python reads but `int()`
refuses ("²"), a day whose next day is past year 9999, a cursor of microseconds beyond any
timestamp would otherwise surface as a 500 deep in a query or a render. Each parser answers
`None` for anything it does not accept; the caller decides whether that is a 404, a 422 or a
filter ignored with a sentence.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

BIGINT_MAX = 2**63 - 1
# The days a filter may name: whole days whose next midnight a datetime can still hold.
FIRST_DAY = date(1970, 1, 1)
LAST_DAY = date(9998, 12, 31)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Timestamps a cursor may carry, as microseconds since the epoch: nothing we store is older,
# and a day's margin is left below `datetime.max` for the arithmetic done on them.
MIN_MICROS = 0
MAX_MICROS = (datetime(9999, 12, 30, tzinfo=UTC) - _EPOCH) // timedelta(microseconds=1)
_ASCII_DIGITS = frozenset("0123456789")
_MAX_DIGITS = len(str(BIGINT_MAX))


def id_in_range(value: int) -> bool:
    """Can `value` be the id of a row (a positive `bigint`)?"""
    return 1 <= value <= BIGINT_MAX


def parse_int(raw: object, *, low: int, high: int) -> int | None:
    """A whole number written in ASCII digits (an optional leading minus), within
    `low..high`; `None` for anything else, including "+1", "1_0", " 1" and "١"."""
    if not isinstance(raw, str):
        return None
    digits = raw[1:] if raw.startswith("-") else raw
    if not digits or len(digits) > _MAX_DIGITS or not _ASCII_DIGITS.issuperset(digits):
        return None
    value = int(raw)
    return value if low <= value <= high else None


def parse_id(raw: object) -> int | None:
    """A row id: ASCII digits naming a positive `bigint`."""
    return parse_int(raw, low=1, high=BIGINT_MAX)


def parse_day(raw: object) -> date | None:
    """A `YYYY-MM-DD` day between `FIRST_DAY` and `LAST_DAY`."""
    if not isinstance(raw, str) or len(raw) != 10 or not raw.isascii():
        return None
    try:
        day = date.fromisoformat(raw)
    except ValueError:
        return None
    return day if FIRST_DAY <= day <= LAST_DAY else None
