"""Cursor paging over append-only lists, newest first, with Graph's ``paging`` block.

A cursor is an opaque base64 token of a position in the list. Lists only grow (deleted
objects stay in place, flagged), so a cursor keeps pointing at the same item while new items
arrive, as Meta's cursors do. `list_body` is what an edge answers: one page of rendered items
under ``data``, read from the call's ``limit``/``after``/``before``, plus ``paging``.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar
from urllib.parse import urlencode

from sandbox.errors import invalid_param

if TYPE_CHECKING:
    from sandbox.call import GraphCall

T = TypeVar("T")


def encode_cursor(position: int) -> str:
    return base64.urlsafe_b64encode(f"QVFI:sandbox:{position}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str, size: int) -> int:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        prefix, position = raw.rsplit(":", 1)
        value = int(position)
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise invalid_param("Invalid cursor") from None
    if prefix != "QVFI:sandbox" or not 0 <= value < size:
        raise invalid_param("Invalid cursor")
    return value


def parse_limit(raw: str | None, *, default: int, maximum: int) -> int:
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise invalid_param("Param limit must be a number") from None
    if value < 1:
        raise invalid_param("Param limit must be a positive number")
    return min(value, maximum)


@dataclass(slots=True)
class Page(Generic[T]):
    items: list[tuple[int, T]]
    has_next: bool
    has_previous: bool


def page_newest_first(
    items: Sequence[T],
    visible: Callable[[T], bool],
    *,
    limit: int,
    after: str | None,
    before: str | None,
) -> Page[T]:
    size = len(items)
    picked: list[tuple[int, T]] = []
    if before:
        # The page just newer than the cursor, still shown newest first.
        position = decode_cursor(before, size) + 1
        while position < size and len(picked) < limit:
            if visible(items[position]):
                picked.append((position, items[position]))
            position += 1
        picked.reverse()
    else:
        position = decode_cursor(after, size) - 1 if after else size - 1
        while position >= 0 and len(picked) < limit:
            if visible(items[position]):
                picked.append((position, items[position]))
            position -= 1
    if not picked:
        return Page([], False, False)
    lowest, highest = picked[-1][0], picked[0][0]
    has_next = any(visible(items[i]) for i in range(lowest - 1, -1, -1))
    has_previous = any(visible(items[i]) for i in range(highest + 1, size))
    return Page(picked, has_next, has_previous)


def paging_block(
    page: Page[T], *, base_url: str, query: dict[str, str]
) -> dict[str, object] | None:
    """Graph's ``paging``: cursors always, ``next``/``previous`` only when there is a page."""
    if not page.items:
        return None
    first, last = encode_cursor(page.items[0][0]), encode_cursor(page.items[-1][0])
    block: dict[str, object] = {"cursors": {"before": first, "after": last}}
    kept = {k: v for k, v in query.items() if k not in ("after", "before")}
    if page.has_next:
        block["next"] = f"{base_url}?{urlencode(kept | {'after': last})}"
    if page.has_previous:
        block["previous"] = f"{base_url}?{urlencode(kept | {'before': first})}"
    return block


def list_body(
    call: GraphCall,
    items: Sequence[T],
    render: Callable[[T], dict[str, Any]],
    *,
    visible: Callable[[T], bool] = lambda _: True,
    default_limit: int,
    max_limit: int,
) -> dict[str, Any]:
    """An edge's answer: the page the call asks for, rendered, with Graph's ``paging``."""
    page = page_newest_first(
        items,
        visible,
        limit=parse_limit(call.param("limit"), default=default_limit, maximum=max_limit),
        after=call.param("after"),
        before=call.param("before"),
    )
    body: dict[str, Any] = {"data": [render(item) for _, item in page.items]}
    paging = paging_block(page, base_url=call.base_url, query=call.query)
    if paging is not None:
        body["paging"] = paging
    return body
