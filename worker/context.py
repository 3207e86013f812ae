"""What every job receives in its SAQ context, typed in one place."""

from __future__ import annotations

from dataclasses import dataclass, field

from app.resources import Resources


@dataclass(slots=True)
class WorkerState:
    """Per-process worker state, created at startup and handed to jobs through `ctx`."""

    worker_id: str
    resources: Resources
    started_at: float
    jobs_done: int = 0
    last_error: str | None = None
    background: set[object] = field(default_factory=set)


def state_of(ctx: dict[str, object]) -> WorkerState:
    state = ctx["state"]
    if not isinstance(state, WorkerState):
        raise TypeError("worker context has no WorkerState; was startup run?")
    return state
