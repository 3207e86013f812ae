"""Redis down loses nothing: the event is stored, answered 200, and relayed to the queue later."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from redis.exceptions import ConnectionError as RedisConnectionError
from saq import Job
from sqlalchemy import select, text

from app.db.models import Comment, DmLog, WebhookEvent, WebhookStatus
from app.delivery.intake.outbox import relay_outbox, run_ingest
from app.delivery.intake.webhook_writer import WebhookIntake, enqueue_ingest
from app.jobs.registry import JOB_OPTIONS, JOBS
from app.queue import JobName, open_queue
from app.resources import Resources
from tests.support.processes import free_port, start_web
from tests.support.webhooks import (
    comment_value,
    comments_body,
    queued_keys,
    seed_account,
    seed_campaign,
    signed_headers,
    store_event,
)

NOW = timedelta(0)


async def stored(resources: Resources) -> list[WebhookEvent]:
    async with resources.sessionmaker() as session:
        result = await session.execute(select(WebhookEvent).order_by(WebhookEvent.id))
        return list(result.scalars())


async def test_redis_down_still_answers_200_and_the_relay_enqueues_later(
    test_env: dict[str, str], artifacts_dir: Path, resources: Resources
) -> None:
    async with resources.sessionmaker() as session, session.begin():
        await seed_campaign(session, await seed_account(session))
    env = test_env | {"REDIS_URL": f"redis://127.0.0.1:{free_port()}/0"}
    port = free_port()
    web = start_web(env, port, artifacts_dir / "ingestion")
    try:
        body = comments_body(comment_value("17870000000000200"))
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=15) as http:
            accepted = await http.post(
                "/webhooks/instagram", content=body, headers=signed_headers(body)
            )
            # Refusals are still answered (and logged) without Redis to throttle them.
            refused = await http.post("/webhooks/instagram", content=body)
    finally:
        web.stop()
    assert accepted.status_code == 200
    assert refused.status_code == 401
    (event,) = await stored(resources)
    # The intake's mark was taken back when the enqueue failed: the relay's first pass takes it.
    assert (event.status, event.relayed_at) == (WebhookStatus.RECEIVED, None)
    assert await queued_keys(resources) == []

    assert await relay_outbox(resources, min_age=NOW) == 1

    assert await queued_keys(resources) == [f"ingest:{event.id}-{event.id}"]
    (event,) = await stored(resources)
    assert event.status is WebhookStatus.ENQUEUED
    assert event.relayed_at is not None
    await run_ingest(resources, [event.id])
    (event,) = await stored(resources)
    assert event.status is WebhookStatus.PROCESSED
    async with resources.sessionmaker() as session:
        assert len((await session.execute(select(Comment))).all()) == 1
        assert len((await session.execute(select(DmLog))).all()) == 1


async def test_the_relay_takes_only_old_unfinished_events_and_retries_lost_ones(
    resources: Resources,
) -> None:
    async with resources.sessionmaker() as session, session.begin():
        old, young, done, refused = [
            await store_event(session, comments_body(comment_value(f"c{n}"))) for n in range(4)
        ]
        await session.execute(
            text(
                "UPDATE webhook_events SET received_at = now() - interval '1 minute' "
                "WHERE id <> :young"
            ),
            {"young": young},
        )
        await session.execute(
            text("UPDATE webhook_events SET status = 'processed' WHERE id = :id"), {"id": done}
        )
        await session.execute(
            text("UPDATE webhook_events SET status = 'rejected' WHERE id = :id"), {"id": refused}
        )

    assert await relay_outbox(resources) == 1  # only `old`: `young` is still on its way
    assert await queued_keys(resources) == [f"ingest:{old}-{old}"]
    # Relayed once, it is left alone while its job may still be waiting...
    assert await relay_outbox(resources) == 0
    # ...and relayed again when that job seems lost (Redis restarted without it).
    await resources.redis.flushdb()
    assert await relay_outbox(resources, again_after=NOW) == 1
    assert await queued_keys(resources) == [f"ingest:{old}-{old}"]
    # Several stuck events go out together, as few jobs as their size allows.
    assert await relay_outbox(resources, min_age=NOW, again_after=NOW) == 2
    assert f"ingest:{old}-{young}" in await queued_keys(resources)


async def test_an_event_its_job_left_is_relayed_without_waiting_ten_minutes(
    resources: Resources,
) -> None:
    async with resources.sessionmaker() as session, session.begin():
        await seed_campaign(session, await seed_account(session))
        left, waiting = [
            await store_event(session, comments_body(comment_value(f"c-left-{n}")))
            for n in range(2)
        ]
        # Both marked enqueued by the web two minutes ago; only `waiting` still has its job.
        await session.execute(
            text(
                "UPDATE webhook_events SET status = 'enqueued', "
                "received_at = now() - interval '2 minutes', "
                "relayed_at = now() - interval '2 minutes'"
            )
        )
    await enqueue_ingest(resources.queue, [(waiting, 100)])

    assert await relay_outbox(resources) == 1
    assert sorted(await queued_keys(resources)) == sorted(
        [f"ingest:{left}-{left}", f"ingest:{waiting}-{waiting}"]
    )
    # Relayed, `left` now waits for its new job like any other.
    assert await relay_outbox(resources) == 0
    summary = await run_ingest(resources, [left])
    assert (summary["processed"], summary["deliveries"]) == (1, 1)


async def test_a_relayed_event_whose_first_job_also_runs_is_ingested_once(
    resources: Resources,
) -> None:
    async with resources.sessionmaker() as session, session.begin():
        await seed_campaign(session, await seed_account(session))
        event_id = await store_event(session, comments_body(comment_value("c-twice")))
    assert await relay_outbox(resources, min_age=NOW) == 1
    first = await run_ingest(resources, [event_id])
    second = await run_ingest(resources, [event_id])
    assert (first["processed"], first["deliveries"]) == (1, 1)
    assert (second["processed"], second["deliveries"]) == (0, 0)


def test_the_relay_runs_as_a_worker_cron() -> None:
    crons = {job.name: job.cron for job in JOBS}
    assert crons[JobName.OUTBOX_RELAY] == "* * * * * */20"


async def test_an_event_the_web_enqueued_is_marked_and_left_to_its_job(
    resources: Resources,
) -> None:
    # What the row says at the moment its job is added to the queue: were it marked only
    # after, a worker ingesting at once would skip the row the mark held, and the mark
    # would then keep the relay away from an event nobody ingested.
    at_enqueue: list[str] = []

    async def look(job: Job) -> None:
        async with resources.engine.connect() as conn:
            at_enqueue.append(
                (await conn.execute(text("SELECT status FROM webhook_events"))).scalar_one()
            )

    resources.queue.lane_for(JobName.INGEST_EVENT).register_before_enqueue(look)
    intake = WebhookIntake(resources.engine, resources.queue)
    intake.start()
    try:
        await intake.store(comments_body(comment_value("c-queued")), "instagram")

        async def queued() -> bool:
            return len(await queued_keys(resources)) == 1

        await _eventually(queued, within_s=10)
    finally:
        await intake.close()
        resources.queue.lane_for(JobName.INGEST_EVENT).unregister_before_enqueue(look)
    assert at_enqueue == ["enqueued"]
    (event,) = await stored(resources)
    assert event.status is WebhookStatus.ENQUEUED
    assert event.relayed_at is not None
    assert await queued_keys(resources) == [f"ingest:{event.id}-{event.id}"]
    # Its job is in the queue: the relay does not add a second one, however old the event.
    assert await relay_outbox(resources, min_age=NOW) == 0
    assert await queued_keys(resources) == [f"ingest:{event.id}-{event.id}"]


async def _eventually(check: Callable[[], Awaitable[bool]], *, within_s: float) -> None:
    deadline = time.monotonic() + within_s
    while not await check():
        assert time.monotonic() < deadline, f"not within {within_s} s"
        await asyncio.sleep(0.05)


async def test_the_relay_marks_events_before_their_job_is_queued(resources: Resources) -> None:
    # As for the web's intake: marked and committed before the enqueue. Marked after (or
    # before, but committed after), a worker taking the job at once skips the rows the mark
    # holds, and the mark then keeps the relay away for ten minutes from an event nobody
    # ingested.
    async with resources.sessionmaker() as session, session.begin():
        await store_event(session, comments_body(comment_value("c-relayed")))
    at_enqueue: list[str] = []

    async def look(job: Job) -> None:
        # Another connection, which a held lock would make wait: NOWAIT fails instead.
        async with resources.engine.begin() as conn:
            status = await conn.execute(text("SELECT status FROM webhook_events FOR UPDATE NOWAIT"))
            at_enqueue.append(status.scalar_one())

    resources.queue.lane_for(JobName.INGEST_EVENT).register_before_enqueue(look)
    try:
        assert await relay_outbox(resources, min_age=NOW) == 1
    finally:
        resources.queue.lane_for(JobName.INGEST_EVENT).unregister_before_enqueue(look)
    assert at_enqueue == ["enqueued"]


async def test_a_failed_relay_enqueue_leaves_the_events_to_the_next_pass(
    resources: Resources,
) -> None:
    async with resources.sessionmaker() as session, session.begin():
        event_id = await store_event(session, comments_body(comment_value("c-no-redis")))
    dead_redis = f"redis://127.0.0.1:{free_port()}/0"
    dead = open_queue(dataclasses.replace(resources.settings, redis_url=dead_redis), JOB_OPTIONS)
    with pytest.raises(RedisConnectionError):
        await relay_outbox(dataclasses.replace(resources, queue=dead), min_age=NOW)
    (event,) = await stored(resources)
    assert (event.id, event.status, event.relayed_at) == (event_id, WebhookStatus.RECEIVED, None)
    # Redis is back: the next pass takes it at once, not ten minutes on.
    assert await relay_outbox(resources, min_age=NOW) == 1
    assert await queued_keys(resources) == [f"ingest:{event_id}-{event_id}"]
