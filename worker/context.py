"""The worker process's state in its SAQ context (`ctx["state"]`), typed in one place.

A `WorkerState` is the `JobRuntime` every job reads (`app.jobs.context`), plus what only the
process itself keeps: when it started, what it has done, its background tasks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from app.jobs.context import JobRuntime


@dataclass(slots=True)
class WorkerState(JobRuntime):
    """Per-process worker state, created at startup and handed to jobs through `ctx`."""

    started_at: float
    jobs_done: int = 0
    last_error: str | None = None
    background: set[object] = field(default_factory=set)


def state_of(ctx: dict[str, object]) -> WorkerState:
    state = ctx["state"]
    if not isinstance(state, WorkerState):
        raise TypeError("worker context has no WorkerState; was startup run?")
    return state
