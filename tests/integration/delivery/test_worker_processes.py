"""Real worker processes: a SIGKILL mid-send never causes a second send, and two workers on one
queue deliver a burst of comments exactly once each."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from app.db.models import LegState
from app.delivery.send.scheduling import enqueue_delivery
from app.queue import JobName, enqueue
from tests.integration.delivery.conftest import World
from tests.support.processes import start_worker, wait_until


async def _wait_for_states(
    world: World, ids: list[int], wanted: set[LegState], within_s: float
) -> None:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        states = [(await world.log(i)).pr_state for i in ids]
        if all(state in wanted for state in states):
            return
        await asyncio.sleep(0.2)
    raise TimeoutError(f"states after {within_s} s: {states}")


async def test_a_worker_killed_during_a_hanging_send_does_not_send_again(
    world: World, delivery_env: dict[str, str], artifacts_dir: Path
) -> None:
    row = await world.comment()
    world.admin.add_fault("messages", "deliver_then_hang", seconds=60, times=1)
    # A long client timeout, so the worker is certainly still waiting when it is killed.
    first = start_worker({**delivery_env, "SEND_TIMEOUT_S": "30"}, artifacts_dir, "crash-worker")
    try:
        await enqueue_delivery(world.resources.queue, row.id)
        wait_until(
            lambda: world.stats(row.trigger_id)["send_requests"] == 1,
            timeout=30,
            what="the worker's send to reach the sandbox",
        )
        assert (await world.log(row.id)).pr_state is LegState.IN_FLIGHT
        first.kill()
    finally:
        first.kill()
    assert len(world.inbox("jane.doe")) == 1  # delivered before the hang

    second = start_worker(delivery_env, artifacts_dir, "restarted-worker")
    try:
        # Whatever re-enqueues it (a reconciler, a webhook redelivery), it is not sent again.
        await enqueue(world.resources.queue, JobName.PROCESS_COMMENT, key="again", dm_log_id=row.id)
        await _wait_for_states(world, [row.id], {LegState.UNCONFIRMED, LegState.SENT}, 60)
    finally:
        second.stop()
    log = await world.log(row.id)
    assert log.pr_state in (LegState.UNCONFIRMED, LegState.SENT)
    assert log.pr_error_message is not None or log.pr_state is LegState.SENT
    assert world.stats(row.trigger_id)["send_requests"] == 1
    assert len(world.inbox("jane.doe")) == 1


async def test_two_workers_deliver_a_burst_exactly_once(
    world: World, delivery_env: dict[str, str], artifacts_dir: Path
) -> None:
    fans = [await world.new_fan(f"burst.fan{i}") for i in range(40)]
    rows = [await world.comment(fan) for fan in fans for _ in range(2)]
    workers = [start_worker(delivery_env, artifacts_dir, f"burst-worker-{n}") for n in range(2)]
    try:
        queue = world.resources.queue
        for row in rows:
            # Each comment arrives twice, as a redelivered webhook and a reconciler would.
            await enqueue_delivery(queue, row.id)
            await enqueue(queue, JobName.PROCESS_COMMENT, key=f"dup:{row.id}", dm_log_id=row.id)
        final = {LegState.SENT, LegState.SKIPPED_DEDUP}
        await _wait_for_states(world, [r.id for r in rows], final, 90)
    finally:
        for worker in workers:
            worker.stop()
    for fan in fans:
        assert len(world.inbox(fan)) == 1, fan
    sent = [r for r in rows if (await world.log(r.id)).pr_state is LegState.SENT]
    assert len(sent) == len(fans)
    for row in rows:
        stats = world.stats(row.trigger_id)
        assert stats["send_requests"] <= 1
        assert stats["private_replies_delivered"] == int(row in sent)
