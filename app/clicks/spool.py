"""The click spool: visits appended to local files before the redirect answers.

The redirect may not wait on PostgreSQL or Redis, yet a click must not be lost when either is
down, nor when the web process dies a moment later. So each visit is one line appended to
this process's open segment file (`os.write`, a few microseconds, into the page cache: it
survives the process, not a power cut), and `recorder.ClickRecorder` copies sealed segments
into `link_clicks` and deletes them.

Files in the directory (several web processes may share it):

- `<id>.open`: a process's current segment, held under an exclusive `flock` for as long as
  the process writes to it. It is created under a temporary name and locked before it gets
  this name, so an `.open` file whose lock is free belongs to a process that is gone.
- `<id>.ready`: a sealed segment, waiting to be copied.

Whoever copies a file holds its lock while doing so; copying twice is harmless (the rows are
unique by click key), so a crash between the insert and the delete costs nothing.
"""

from __future__ import annotations

import fcntl
import logging
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

logger = logging.getLogger("oncereply.clicks")

OPEN = ".open"
READY = ".ready"


class ClickSpool:
    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self._fd: int | None = None
        self._path: Path | None = None
        self._lines = 0

    @property
    def lines_open(self) -> int:
        """Lines in this process's open segment, not yet sealed."""
        return self._lines

    def append(self, line: bytes) -> None:
        fd = self._fd if self._fd is not None else self._open_segment()
        os.write(fd, line)
        self._lines += 1

    def seal(self) -> None:
        """Hand the open segment to the copier (when it has anything in it)."""
        if self._fd is None or self._path is None or not self._lines:
            return
        # Renamed while still locked: no copier can take it for an orphan in between.
        self._path.rename(self._path.with_suffix(READY))
        os.close(self._fd)
        self._fd, self._path, self._lines = None, None, 0

    def close(self) -> None:
        if self._lines:
            self.seal()
        elif self._fd is not None and self._path is not None:
            self._path.unlink(missing_ok=True)
            os.close(self._fd)
            self._fd, self._path = None, None

    def waiting(self) -> list[Path]:
        """Sealed segments and orphaned open ones, oldest first (this process's own open
        segment is locked, so `take` skips it)."""
        paths = [p for p in self.directory.iterdir() if p.suffix in (READY, OPEN)]
        return sorted(paths, key=_age)

    @contextmanager
    def take(self, path: Path) -> Iterator[bytes | None]:
        """A segment's bytes under its lock, deleted when the block exits cleanly; None when
        another process holds it (or it is gone)."""
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            yield None
            return
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield None
                return
            chunks: list[bytes] = []
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
            yield b"".join(chunks)
            path.unlink(missing_ok=True)
        finally:
            os.close(fd)

    def _open_segment(self) -> int:
        name = uuid.uuid4().hex
        temporary = self.directory / f".{name}.new"
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        path = self.directory / f"{name}{OPEN}"
        temporary.rename(path)
        self._fd, self._path, self._lines = fd, path, 0
        return fd


def _age(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return 0.0
