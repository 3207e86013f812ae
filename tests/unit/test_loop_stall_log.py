"""`tests.support.debug_web`'s stall log: what held the loop counts, waiting for a core does
not."""

from __future__ import annotations

import asyncio
import logging
import resource
import time

import pytest

from tests.support.debug_web import SLOW_CALLBACK_S, loop_time_held, measured
from tests.support.loop_stalls import stalls_in


def _usage(cpu_s: float, voluntary: int) -> resource.struct_rusage:
    return resource.struct_rusage((cpu_s, 0.0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, voluntary, 0))


def test_a_callback_that_only_waited_for_a_core_held_the_loop_for_its_cpu_time() -> None:
    assert loop_time_held(0.4, _usage(1.0, 5), _usage(1.02, 5)) == pytest.approx(0.02)


def test_a_callback_that_blocked_held_the_loop_for_its_wall_time() -> None:
    assert loop_time_held(0.4, _usage(1.0, 5), _usage(1.01, 6)) == 0.4


def _run_measured(callback: object, caplog: pytest.LogCaptureFixture) -> str:
    loop = asyncio.new_event_loop()
    try:
        handle = asyncio.Handle(callback, (), loop)  # type: ignore[arg-type]
        with caplog.at_level(logging.WARNING, logger="asyncio"):
            measured(asyncio.Handle._run)(handle)
    finally:
        loop.close()
    return caplog.text


def _spin(seconds: float) -> None:
    until = time.thread_time() + seconds
    while time.thread_time() < until:
        pass


def test_busy_and_blocking_callbacks_are_logged_and_quick_ones_are_not(
    caplog: pytest.LogCaptureFixture,
) -> None:
    busy = stalls_in(
        _run_measured(lambda: _spin(SLOW_CALLBACK_S * 1.5), caplog), at_least_s=SLOW_CALLBACK_S
    )
    assert len(busy) == 1
    # The log gives milliseconds: 0.1 * 1.5 is a hair over the 0.150 a 150 ms spin logs.
    assert busy[0].seconds >= round(SLOW_CALLBACK_S * 1.5, 3)
    caplog.clear()
    sleeping = _run_measured(lambda: time.sleep(SLOW_CALLBACK_S * 1.5), caplog)
    blocked = stalls_in(sleeping, at_least_s=SLOW_CALLBACK_S)
    assert len(blocked) == 1
    caplog.clear()
    assert _run_measured(lambda: None, caplog) == ""
