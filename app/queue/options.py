"""How one job runs: its timeout and its attempt budget, stamped on the job when enqueued.

SAQ's defaults (10 s, no retry) fit none of our jobs, so every job declares its options in
`app.jobs.registry`, and a queue is opened with them (`app.queue.enqueue.open_queue`).

A job that calls Meta gets a timeout that grows with SEND_TIMEOUT_S, the bound of each call
(`JobOptions.timeout_for`): SAQ cancels a job past its timeout, which in the middle of a send
would leave a claim for the stale-claim sweep to call UNCONFIRMED although the send would
have finished. (The queue's sweep never aborts a held job: `app.queue.saq_adapter`.)

A job runs in one of two lanes (`Lane`), each a SAQ queue of its own that every worker
consumes: the work lane for deliveries and whatever calls Meta or runs long, the control lane
for the short jobs that decide what the work is (ingest, the pacer, the relays and sweeps).
A queue is first in, first out, so ten thousand deliveries waiting would otherwise hold back
the ingest of the comments that arrive behind them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum


class Lane(StrEnum):
    WORK = "work"
    CONTROL = "control"


@dataclass(frozen=True, slots=True)
class JobOptions:
    # Seconds; for a job that calls Meta, what it needs besides those calls.
    timeout: int
    retries: int = 1  # SAQ counts attempts: 1 means run once, never retried by SAQ.
    retry_delay: float = 0.0
    retry_backoff: bool | float = False
    heartbeat: int = 0
    ttl: int = 600
    # The most calls to Meta one run makes, each allowed up to the send timeout.
    meta_calls: int = 0
    lane: Lane = Lane.WORK

    def timeout_for(self, send_timeout_s: float) -> int:
        return self.timeout + math.ceil(self.meta_calls * send_timeout_s)
