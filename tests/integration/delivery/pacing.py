"""An account's pacer in a test, run the way the worker runs it.

A row the account's pace holds back waits for the pacer, with no job of its own: the worker
runs the pacer's job (`pace_account`), which queues one delivery job per row it grants,
carrying the grant. `run_pacer` does the same from the test: it takes the pacer's jobs waiting
in the queue (SAQ's own schedule moves the runs that came due, as the worker's does), runs the
function the job runs (`app/jobs/handlers.py:pace_account`), then takes the delivery jobs it
queued and runs each with its grant (`app/jobs/handlers.py:process_comment`). Each job is
taken off the queue first, so nothing runs twice.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from saq import Job

from app.delivery.send.dispatch import deliver
from app.delivery.send.pacer import PaceReport, pace_account
from app.delivery.send.steps import Report
from app.queue.names import JobName
from app.queue.saq_adapter import queued_job_keys
from app.resources import Resources

if TYPE_CHECKING:
    from tests.integration.delivery.conftest import World


@dataclass
class PacerRun:
    paced: list[PaceReport] = field(default_factory=list)
    # (row id, what its job reported), in the order the jobs ran
    delivered: list[tuple[int, Report]] = field(default_factory=list)


async def take_queued(resources: Resources, function: JobName) -> list[Job]:
    """The jobs of `function` waiting to run now, oldest first, taken off the queue."""
    taken = []
    for lane in resources.queue.lanes:
        await lane.schedule()
        for key in await queued_job_keys(lane):
            job = await lane.job(key)
            if job is None or job.function != function.value:
                continue
            await lane.abort(job, "run by the test")
            taken.append(job)
    return taken


async def run_pacer(resources: Resources, *, worker_id: str = "w") -> PacerRun:
    """Run the pacer jobs waiting now, each followed by the delivery jobs it queued, and by
    those the last job of each batch queued (its end runs the pacer for the next batch), one
    worker taking them in turn."""
    run = PacerRun()
    for paced in await take_queued(resources, JobName.PACE_ACCOUNT):
        run.paced.append(await pace_account(resources, int(paced.kwargs["account_id"])))
        while jobs := await take_queued(resources, JobName.PROCESS_COMMENT):
            await _run_deliveries(resources, jobs, run, worker_id)
    return run


async def _run_deliveries(
    resources: Resources, jobs: list[Job], run: PacerRun, worker_id: str
) -> None:
    for job in jobs:
        dm_log_id = int(job.kwargs["dm_log_id"])
        report = await deliver(
            resources, worker_id=worker_id, dm_log_id=dm_log_id, grant=job.kwargs.get("grant")
        )
        run.delivered.append((dm_log_id, report))


async def run_pacer_until(
    resources: Resources,
    done: Callable[[], Awaitable[bool]],
    *,
    idle_s: float = 60.0,
    worker_id: str = "w",
) -> list[PacerRun]:
    """Run the pacer's jobs as they come due until `done()` says so; every run, in order.
    Waits on the pacer's own schedule: fails only when no pacer job comes due for `idle_s`
    (the pacer stopped looking after rows still waiting)."""
    runs = []
    idle_since = time.monotonic()
    while not await done():
        run = await run_pacer(resources, worker_id=worker_id)
        if run.paced:
            runs.append(run)
            idle_since = time.monotonic()
        elif time.monotonic() - idle_since > idle_s:
            raise AssertionError(f"no pacer job came due for {idle_s:g} s")
        else:
            await asyncio.sleep(0.05)
    return runs


async def until_request_left(
    world: World, dm_log_id: int, delivering: asyncio.Task[Report], *, public: bool = False
) -> None:
    """Wait until the delivery under way has noted its request to Meta as leaving (the
    private or the public leg's), failing if it ends first or nothing leaves within a minute."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 60
    while True:
        log = await world.log(dm_log_id)
        if (log.pub_requested_at if public else log.pr_requested_at) is not None:
            return
        assert not delivering.done(), delivering.result()
        assert loop.time() < deadline, "the request never left"
        await asyncio.sleep(0.05)
