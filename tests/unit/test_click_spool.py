"""The click spool: lines survive the process that wrote them, and are read once complete."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.clicks.recorder import click_key, parse_lines, spool_line
from app.clicks.spool import ClickSpool
from app.clicks.tokens import LinkTarget
from app.clicks.visitors import Visit


def _line(n: int) -> bytes:
    return spool_line(
        click_key("tok", str(n)), LinkTarget(n, 0, "https://a.example"), Visit.CLICK, 1.5
    )


def test_sealed_segment_is_taken_once(tmp_path: Path) -> None:
    web = ClickSpool(tmp_path)
    web.append(_line(1))
    web.append(_line(2))
    copier = ClickSpool(tmp_path)
    # Still open and locked by the writer: nobody else takes it.
    [open_segment] = copier.waiting()
    with copier.take(open_segment) as data:
        assert data is None
    web.seal()
    [ready] = copier.waiting()
    with copier.take(ready) as data:
        assert data is not None
        assert [c.dm_log_id for c in parse_lines(data)] == [1, 2]
    assert copier.waiting() == []


def test_a_dead_writers_open_segment_is_taken(tmp_path: Path) -> None:
    web = ClickSpool(tmp_path)
    web.append(_line(3))
    # The process dies: its descriptor (and lock) go, the file stays `.open`.
    assert web._fd is not None
    os.close(web._fd)
    copier = ClickSpool(tmp_path)
    [orphan] = copier.waiting()
    assert orphan.suffix == ".open"
    with copier.take(orphan) as data:
        assert data is not None
        assert [c.dm_log_id for c in parse_lines(data)] == [3]
    assert copier.waiting() == []


def test_a_failed_copy_keeps_the_file(tmp_path: Path) -> None:
    web = ClickSpool(tmp_path)
    web.append(_line(4))
    web.seal()
    [ready] = web.waiting()

    def copy_fails() -> None:
        with web.take(ready) as data:
            assert data is not None
            raise ConnectionError("database down")

    with pytest.raises(ConnectionError):
        copy_fails()
    assert web.waiting() == [ready]


def test_a_torn_last_line_is_skipped() -> None:
    whole = _line(5) + _line(6)
    assert [c.dm_log_id for c in parse_lines(whole[:-7])] == [5]
    assert parse_lines(b"garbage\tline\n\n") == []
