"""`python -m tests.support.debug_web PORT`: the web app as `python -m app serve` runs it, with
every event-loop callback that held the loop 0.1 s or more logged as "Executing … took N
seconds". Tests read those lines (`tests.support.loop_stalls`).

asyncio's own debug mode logs such callbacks too, but by wall time, which counts the time the
process spent waiting for a core: on a busy machine a callback that did 20 ms of work can
take 300 ms of wall time, and a test would blame the code for the machine. Here a callback's
time is the CPU time the loop's thread spent in it; only when the thread also gave up the
core of its own accord in it (it blocked: a synchronous call, a lock, the GIL held by another
thread) does the wall time count, since the loop then waited on that call, not on a core.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import sys
import time
from collections.abc import Callable

import uvicorn

from app.asgi import create_app
from app.logs import configure_logging
from app.settings import load_settings
from app.web.bounded_protocol import KEEP_ALIVE_S, bounded_protocol

SLOW_CALLBACK_S = 0.1
logger = logging.getLogger("asyncio")


def loop_time_held(
    wall_s: float, before: resource.struct_rusage, after: resource.struct_rusage
) -> float:
    """How long a callback held the loop, from the thread's usage around it."""
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    blocked = after.ru_nvcsw > before.ru_nvcsw
    return wall_s if blocked else cpu_s


def measured(run: Callable[[asyncio.Handle], None]) -> Callable[[asyncio.Handle], None]:
    def measured_run(handle: asyncio.Handle) -> None:
        before = resource.getrusage(resource.RUSAGE_THREAD)
        started = time.perf_counter()
        run(handle)
        wall_s = time.perf_counter() - started
        if wall_s < SLOW_CALLBACK_S:
            return
        held = loop_time_held(wall_s, before, resource.getrusage(resource.RUSAGE_THREAD))
        if held >= SLOW_CALLBACK_S:
            logger.warning("Executing %r took %.3f seconds (wall %.3f)", handle, held, wall_s)

    return measured_run


def log_stalls() -> None:
    """From now on, this process logs every callback that holds its loop (test support only:
    every callback of an asyncio loop runs through `Handle._run`)."""
    asyncio.Handle._run = measured(asyncio.Handle._run)  # type: ignore[method-assign]


def main() -> None:
    settings = load_settings()
    configure_logging(settings.log_level)
    log_stalls()
    config = uvicorn.Config(
        create_app(settings),
        host="127.0.0.1",
        port=int(sys.argv[1]),
        log_level=settings.log_level.lower(),
        access_log=False,
        loop="none",
        timeout_graceful_shutdown=10,
        timeout_keep_alive=KEEP_ALIVE_S,
        http=bounded_protocol(settings.request_read_timeout_s),
    )
    asyncio.run(uvicorn.Server(config).serve())


if __name__ == "__main__":
    main()
