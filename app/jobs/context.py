"""What a job function receives from the process running it, through SAQ's `ctx["state"]`.

The worker process puts its state there at startup (`worker.context.WorkerState`, which is a
`JobRuntime`); a job reads only this part of it: the process's resources and worker id.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.resources import Resources


@dataclass(slots=True)
class JobRuntime:
    worker_id: str
    resources: Resources


def runtime_of(ctx: dict[str, Any]) -> JobRuntime:
    runtime = ctx.get("state")
    if not isinstance(runtime, JobRuntime):
        raise TypeError("job context has no JobRuntime; was the worker's startup run?")
    return runtime
