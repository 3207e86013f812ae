"""The web process's writer for incoming webhook events: group commit, then enqueue.

A request hands its verified body to `WebhookIntake.store()` and waits until its row is
committed: the 200 that follows is a promise that the event is durable. One background task
takes every request waiting at that moment (up to `max_batch`) into one
`INSERT … SELECT FROM unnest(…)` on a dedicated autocommit connection: one statement, one
round trip, one commit for the whole group. Under load many events share a commit; when idle
a request is written at once — there is no timer to wait for.

Committed ids go to a second task that enqueues `ingest_event` jobs, one per group of
consecutive events (at most `EVENTS_PER_JOB` events or `BYTES_PER_JOB` of bodies, gathered
for at most 20 ms under load; at low traffic one job per POST, enqueued at once), keyed
`ingest:<first id>-<last id>`. Just before, it marks those events `enqueued` (with the
time, in `relayed_at`) in one UPDATE per group of jobs, so the outbox relay leaves them to
their job instead of enqueueing a second, no-op one for every event still waiting 15 s later
(a backlog); a failed enqueue takes the mark back. The request does not wait for any of
that: if Redis is down or the process dies first, the events are still in `webhook_events`
(`received`, or `enqueued` if the process died between the two steps, which the relay takes
once no job of theirs is pending, 30 s on), and the outbox relay enqueues them later. Nothing
here is a module global: the web app creates one intake in its lifespan and closes it on
shutdown, after the last request.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass

import psycopg
from saq import Queue
from sqlalchemy import TextClause, func, insert, text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.models import WebhookEvent, WebhookStatus
from app.queue import JobName, enqueue_many

logger = logging.getLogger("oncereply.webhooks")

EVENTS_PER_JOB = 100
BYTES_PER_JOB = 1024 * 1024

_INSERT_MANY = (
    "INSERT INTO webhook_events (body, signature_key) "
    "SELECT body, signature_key FROM unnest(%b::bytea[], %b::text[]) AS t(body, signature_key) "
    "RETURNING id"
)
# Marked before their job is enqueued, never after: a job that ran while the mark held the
# rows would skip them (ingest locks with SKIP LOCKED), and the mark would then keep the relay
# away from events nobody ingested. Rows another job is ingesting now are left alone.
_MARK_ENQUEUED = text(
    "UPDATE webhook_events SET status = 'enqueued', relayed_at = now() "
    "WHERE id IN (SELECT id FROM webhook_events WHERE id = ANY(CAST(:ids AS bigint[])) "
    "AND status = 'received' FOR UPDATE SKIP LOCKED)"
)
# The enqueue failed: back to the relay's first pass (15 s), not its retry (10 min).
UNMARK_ENQUEUED = text(
    "UPDATE webhook_events SET status = 'received', relayed_at = NULL "
    "WHERE id = ANY(CAST(:ids AS bigint[])) AND status = 'enqueued'"
)


class IntakeUnavailableError(Exception):
    """The event could not be stored (database down, too slow or overloaded): answer 503."""


_INGEST_KEY_PREFIX = "ingest:"


def ingest_job_key(event_ids: Sequence[int]) -> str:
    return f"{_INGEST_KEY_PREFIX}{event_ids[0]}-{event_ids[-1]}"


def ingest_key_range(key: str) -> tuple[int, int] | None:
    """The first and last event id of an `ingest_job_key`; None for any other key."""
    first, _, last = key.removeprefix(_INGEST_KEY_PREFIX).partition("-")
    if key.startswith(_INGEST_KEY_PREFIX) and first.isdigit() and last.isdigit():
        return int(first), int(last)
    return None


def group_for_jobs(events: Sequence[tuple[int, int]]) -> list[list[int]]:
    """Split `(event id, body size)` pairs into the id lists of successive ingest jobs."""
    groups: list[list[int]] = []
    current: list[int] = []
    size = 0
    for event_id, body_size in events:
        if current and (len(current) >= EVENTS_PER_JOB or size + body_size > BYTES_PER_JOB):
            groups.append(current)
            current, size = [], 0
        current.append(event_id)
        size += body_size
    if current:
        groups.append(current)
    return groups


async def enqueue_ingest(queue: Queue, events: Sequence[tuple[int, int]]) -> int:
    """Enqueue the ingest jobs for these `(event id, body size)` pairs; returns how many."""
    jobs = [(ingest_job_key(ids), {"event_ids": ids}) for ids in group_for_jobs(events)]
    return await enqueue_many(queue, JobName.INGEST_EVENT, jobs)


@dataclass(slots=True)
class _Pending:
    body: bytes
    key_name: str
    done: asyncio.Future[None]


class WebhookIntake:
    def __init__(
        self,
        engine: AsyncEngine,
        queue: Queue,
        *,
        max_batch: int = 500,
        max_waiting: int = 20_000,
        store_timeout_s: float = 4.0,
        enqueue_timeout_s: float = 5.0,
        linger_s: float = 0.02,
    ) -> None:
        self._engine = engine
        self._conninfo = engine.url.set(drivername="postgresql").render_as_string(
            hide_password=False
        )
        self._connection: psycopg.AsyncConnection[tuple[int]] | None = None
        self._queue = queue
        self._max_batch = max_batch
        self._max_waiting = max_waiting
        self._store_timeout_s = store_timeout_s
        self._enqueue_timeout_s = enqueue_timeout_s
        self._linger_s = linger_s
        self._waiting: asyncio.Queue[_Pending] = asyncio.Queue()
        self._to_enqueue: asyncio.Queue[tuple[int, int]] = asyncio.Queue()
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._write_loop(), name="webhook-intake-writer"),
            asyncio.create_task(self._enqueue_loop(), name="webhook-intake-enqueuer"),
        ]

    async def close(self) -> None:
        """Stop after a last pass: committed events still get their enqueue attempt."""
        writer, enqueuer = self._tasks
        writer.cancel()
        await asyncio.gather(writer, return_exceptions=True)
        while not self._waiting.empty():
            self._waiting.get_nowait().done.cancel()
        try:
            async with asyncio.timeout(self._enqueue_timeout_s):
                await self._to_enqueue.join()
        except TimeoutError:
            logger.warning("%d events left for the outbox relay", self._to_enqueue.qsize())
        enqueuer.cancel()
        await asyncio.gather(enqueuer, return_exceptions=True)
        if self._connection is not None:
            await self._connection.close()

    async def store(self, body: bytes, key_name: str) -> None:
        """Return once the event is committed; `IntakeUnavailableError` when it cannot be."""
        if self._waiting.qsize() >= self._max_waiting:
            raise IntakeUnavailableError("too many events waiting to be written")
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.put_nowait(_Pending(body, key_name, done))
        try:
            async with asyncio.timeout(self._store_timeout_s):
                await asyncio.shield(done)
        except TimeoutError:
            # The row may still be committed later; Meta's redelivery then makes a second
            # event, which ingest turns into nothing new (the unique keys are the dedupe).
            raise IntakeUnavailableError("the database did not answer in time") from None

    async def store_rejected(self, body: bytes, key_name: str, reason: str) -> int:
        """Keep a signed body we refuse (not JSON), for investigation; never ingested."""
        statement = (
            insert(WebhookEvent)
            .values(
                body=body,
                signature_key=key_name,
                status=WebhookStatus.REJECTED,
                reject_reason=reason[:500],
                processed_at=func.now(),
            )
            .returning(WebhookEvent.id)
        )
        async with self._engine.begin() as connection:
            result = await connection.execute(statement)
            return int(result.scalar_one())

    async def _write_loop(self) -> None:
        while True:
            batch = [await self._waiting.get()]
            while len(batch) < self._max_batch and not self._waiting.empty():
                batch.append(self._waiting.get_nowait())
            try:
                ids = await self._insert(batch)
            except Exception as exc:  # noqa: BLE001 - every waiting request learns of it
                logger.warning("could not store %d webhook events: %s", len(batch), exc)
                await self._drop_connection()
                for pending in batch:
                    if not pending.done.done():
                        pending.done.set_exception(IntakeUnavailableError(str(exc)))
                continue
            for pending in batch:
                if not pending.done.done():
                    pending.done.set_result(None)
            # Ids come back in insertion order; only their sizes matter for grouping jobs.
            for event_id, pending in zip(sorted(ids), batch, strict=True):
                self._to_enqueue.put_nowait((event_id, len(pending.body)))

    async def _insert(self, batch: Sequence[_Pending]) -> list[int]:
        if self._connection is None or self._connection.closed:
            self._connection = await psycopg.AsyncConnection.connect(
                self._conninfo, autocommit=True, connect_timeout=5
            )
        cursor = await self._connection.execute(
            _INSERT_MANY, ([p.body for p in batch], [p.key_name for p in batch])
        )
        return [row[0] for row in await cursor.fetchall()]

    async def _drop_connection(self) -> None:
        if self._connection is not None:
            try:
                await self._connection.close()
            except Exception:
                logger.debug("closing a broken intake connection failed", exc_info=True)
            self._connection = None

    async def _enqueue_loop(self) -> None:
        loop = asyncio.get_running_loop()
        previous = 1
        while True:
            events = [await self._to_enqueue.get()]
            # Under load, linger a moment so one job carries many events: a worker ingests 100
            # events in one transaction far faster than in 100 (the request was answered
            # already). A lone event (the last group was one too) goes at once: waiting
            # would only add its wait to the comment's time to its DM.
            linger = self._linger_s if previous > 1 else 0.0
            deadline = loop.time() + linger
            while len(events) < EVENTS_PER_JOB and (remaining := deadline - loop.time()) > 0:
                try:
                    async with asyncio.timeout(remaining):
                        events.append(await self._to_enqueue.get())
                except TimeoutError:
                    break
            while len(events) < self._max_batch and not self._to_enqueue.empty():
                events.append(self._to_enqueue.get_nowait())
            previous = len(events)
            event_ids = [event_id for event_id, _ in events]
            try:
                async with asyncio.timeout(self._enqueue_timeout_s):
                    await self._mark(_MARK_ENQUEUED, event_ids)
            except Exception as exc:  # noqa: BLE001 - at worst the relay adds a no-op job
                logger.warning("could not mark %d events enqueued: %s", len(events), exc)
            try:
                async with asyncio.timeout(self._enqueue_timeout_s):
                    await enqueue_ingest(self._queue, events)
            except Exception as exc:  # noqa: BLE001 - the outbox relay picks these up
                logger.warning(
                    "could not enqueue ingest jobs for %d events (the outbox relay will): %s",
                    len(events),
                    exc,
                )
                try:
                    async with asyncio.timeout(self._enqueue_timeout_s):
                        await self._mark(UNMARK_ENQUEUED, event_ids)
                except Exception:  # noqa: BLE001 - the relay's retry still takes them
                    logger.warning("could not unmark %d events", len(events))
            finally:
                for _ in events:
                    self._to_enqueue.task_done()

    async def _mark(self, statement: TextClause, event_ids: list[int]) -> None:
        # A pooled connection, not the writer's: requests waiting on the INSERT never wait
        # for this.
        async with self._engine.connect() as connection:
            await connection.execution_options(isolation_level="AUTOCOMMIT")
            await connection.execute(statement, {"ids": event_ids})
