"""Copies the click spool into `link_clicks`, in the background of each web process.

`ClickRecorder.record` is all the redirect does about a visit: one line appended to the spool
(`spool.ClickSpool`), no await. A background task seals the open segment every
`interval_s` and copies every waiting segment (this process's, another live process's
sealed ones, a dead process's leftovers) with one statement per file
(`rollup.insert_clicks_sql`: the clicks, joined to `dm_logs` for the person, campaign and
workspace, `ON CONFLICT (click_key) DO NOTHING`, and the counts the dashboard reads). When
PostgreSQL is down the files stay and the copy is tried again with a growing pause (up to
`max_backoff_s`): the clicks appear once it is back, each once.

The click key is a hash of the link's token and the request id (`X-Request-Id` when a proxy
in front sets one, else a fresh id), so a request replayed by a proxy, or a line copied twice,
is one click; two separate clicks by one person are two (and one unique).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy.ext.asyncio import AsyncEngine

from app.clicks.rollup import UNNEST_SOURCE, insert_clicks_sql
from app.clicks.spool import ClickSpool
from app.clicks.tokens import LinkTarget
from app.clicks.visitors import Visit
from app.db.raw import pipelined_transaction

logger = logging.getLogger("oncereply.clicks")

MAX_REQUEST_ID_CHARS = 200

_COPY = insert_clicks_sql(UNNEST_SOURCE)


@dataclass(frozen=True, slots=True)
class SpooledClick:
    key: bytes
    dm_log_id: int
    button: int
    visit: Visit
    at: datetime


def click_key(token: str, request_id: str) -> bytes:
    return hashlib.sha256(f"{token}\0{request_id}".encode()).digest()[:16]


def request_id_of(header: bytes | None) -> str:
    """The proxy's request id when it sent a usable one, else a new one."""
    if header:
        value = header.decode("latin-1").strip()
        if 0 < len(value) <= MAX_REQUEST_ID_CHARS and value.isprintable():
            return value
    return os.urandom(16).hex()


def spool_line(key: bytes, target: LinkTarget, visit: Visit, at: float) -> bytes:
    return f"{key.hex()}\t{target.dm_log_id}\t{target.button}\t{visit.value}\t{at:.3f}\n".encode()


def parse_lines(data: bytes) -> list[SpooledClick]:
    """The complete, well-formed lines of a segment (a torn last line is dropped)."""
    clicks: list[SpooledClick] = []
    for line in data.split(b"\n"):
        parts = line.split(b"\t")
        if len(parts) != 5:
            continue
        try:
            clicks.append(
                SpooledClick(
                    key=bytes.fromhex(parts[0].decode()),
                    dm_log_id=int(parts[1]),
                    button=int(parts[2]),
                    visit=Visit(parts[3].decode()),
                    at=datetime.fromtimestamp(float(parts[4]), UTC),
                )
            )
        except (ValueError, UnicodeDecodeError):
            continue
    return clicks


async def copy_clicks(engine: AsyncEngine, clicks: list[SpooledClick]) -> None:
    if not clicks:
        return
    params = {
        "keys": [c.key for c in clicks],
        "ids": [c.dm_log_id for c in clicks],
        "buttons": [c.button for c in clicks],
        "visits": [c.visit.value for c in clicks],
        "ats": [c.at for c in clicks],
    }
    async with pipelined_transaction(engine) as db:
        await db.execute(_COPY, params)


class ClickRecorder:
    def __init__(
        self,
        engine: AsyncEngine,
        spool: ClickSpool,
        *,
        interval_s: float = 0.1,
        max_backoff_s: float = 5.0,
        copy_timeout_s: float = 10.0,
    ) -> None:
        self._engine = engine
        self.spool = spool
        self._interval_s = interval_s
        self._max_backoff_s = max_backoff_s
        self._copy_timeout_s = copy_timeout_s
        self._task: asyncio.Task[None] | None = None
        self._failing_since: float | None = None

    def record(self, token: str, target: LinkTarget, visit: Visit, request_id: str) -> None:
        """Spool one visit (synchronous: the redirect answers right after)."""
        key = click_key(token, request_id)
        self.spool.append(spool_line(key, target, visit, time.time()))

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="click-recorder")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        self.spool.seal()
        try:
            await self.copy_waiting()
        except Exception as exc:  # noqa: BLE001 - the files stay; the next process copies them
            logger.warning("clicks left in the spool at shutdown: %s", exc)
        self.spool.close()

    async def copy_waiting(self) -> int:
        """Seal the open segment and copy every waiting one; raises when the database fails
        (the file in hand stays for the next try)."""
        self.spool.seal()
        copied = 0
        for path in self.spool.waiting():
            with self.spool.take(path) as data:
                if data is None:
                    continue
                clicks = parse_lines(data)
                await asyncio.wait_for(copy_clicks(self._engine, clicks), self._copy_timeout_s)
                copied += len(clicks)
        return copied

    async def _run(self) -> None:
        pause = self._interval_s
        while True:
            await asyncio.sleep(pause)
            try:
                await self.copy_waiting()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - kept in the spool, tried again
                pause = min(max(pause * 2, 0.5), self._max_backoff_s)
                if self._failing_since is None:
                    self._failing_since = time.monotonic()
                    logger.warning("clicks wait in the spool, the database refused them: %s", exc)
                continue
            if self._failing_since is not None:
                logger.info(
                    "clicks copied again after %.1f s", time.monotonic() - self._failing_since
                )
                self._failing_since = None
            pause = self._interval_s
