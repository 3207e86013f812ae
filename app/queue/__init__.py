"""The job queue: job names, their run options, and the one way to enqueue.

Low in the layering: services enqueue work by `JobName` through `enqueue`/`enqueue_many` on
the queue their process opened, and never import the job registry (`app.jobs.registry`),
which sits at the top and hands its options to each process's queue when it is opened.
`saq_adapter` is the only module that touches SAQ's internals (docs/architecture.md#queue).
"""

from app.queue.enqueue import (
    JobQueue,
    QueueNotConfiguredError,
    UnknownJobError,
    WrongLaneError,
    enqueue,
    enqueue_many,
    lane_queue_name,
    open_queue,
)
from app.queue.names import JobName
from app.queue.options import JobOptions, Lane

__all__ = [
    "JobName",
    "JobOptions",
    "JobQueue",
    "Lane",
    "QueueNotConfiguredError",
    "UnknownJobError",
    "WrongLaneError",
    "enqueue",
    "enqueue_many",
    "lane_queue_name",
    "open_queue",
]
