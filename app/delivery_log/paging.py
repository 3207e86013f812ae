"""Keyset paging shared by the log and the misses view: newest first, by `(created_at, id)`.

A page is fetched with one query for `size + 1` rows: the extra row only says whether an
older page exists. "Newer" pages read upwards from their cursor and are turned around; a
newer page that reaches the top is simply the first page.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from sqlalchemy import BigInteger, ColumnElement, DateTime, literal, tuple_

from app.delivery_log.filters import Key


class Keyed(Protocol):
    @property
    def key(self) -> Key: ...


R = TypeVar("R", bound=Keyed)
# fetch(before, after, limit): rows older than `before` newest first, or newer than `after`
# oldest first, or (neither) the newest rows.
Fetch = Callable[[Key | None, Key | None, int], Awaitable[Sequence[R]]]


def _bound(key: Key) -> ColumnElement[Any]:
    return tuple_(literal(key.created_at, DateTime(timezone=True)), literal(key.id, BigInteger))


def older_than(created_at: Any, row_id: Any, key: Key) -> ColumnElement[bool]:
    """Rows after `key` in newest-first order (a row-value comparison the btree walks)."""
    return tuple_(created_at, row_id) < _bound(key)


def newer_than(created_at: Any, row_id: Any, key: Key) -> ColumnElement[bool]:
    return tuple_(created_at, row_id) > _bound(key)


@dataclass(frozen=True, slots=True)
class Paged(Generic[R]):
    rows: list[R]
    older: Key | None  # cursor of the next, older page
    newer: Key | None  # cursor of the previous, newer page; None on the first page
    more: bool  # rows exist beyond the last one shown

    @property
    def first(self) -> bool:
        return self.newer is None


async def keyset_page(
    fetch: Fetch[R], *, before: Key | None, after: Key | None, size: int
) -> Paged[R]:
    if after is not None and before is None:
        upwards = list(await fetch(None, after, size + 1))
        if len(upwards) > size:
            rows = list(reversed(upwards[:size]))
            return Paged(rows, older=rows[-1].key, newer=rows[0].key, more=True)
    found = list(await fetch(before, None, size + 1))
    more = len(found) > size
    rows = found[:size]
    older = rows[-1].key if more and rows else None
    if before is None:
        return Paged(rows, older=older, newer=None, more=more)
    return Paged(rows, older=older, newer=rows[0].key if rows else before, more=more)
