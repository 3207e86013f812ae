"""Running a delivery job: the row is loaded once and its trigger kind picks the flow.

A comment goes through `comment_flow` (its public reply, then its private reply); a tap, a DM
keyword trigger or a follow-up through `dm_flow`. Every delivery job (`process_comment`,
`process_postback`, `process_message`, `send_follow_up`) runs `deliver`, so whichever job a
row was given (the dashboard's retry enqueues `process_comment` for any row), it takes its
own flow.

A flow works in two parts: `start`, on the connection that loaded the row (what can be
settled or claimed at once costs no second checkout), and `finish`, with that connection back
in the pool, since it calls Meta. A later attempt the run asked for (a retry, a re-check, a
budget wait) is enqueued last, under the row's own job.
"""

from __future__ import annotations

from typing import Protocol

from sqlalchemy.ext.asyncio import AsyncConnection

from app.db.engine import autocommit
from app.db.models import LegState, TriggerKind
from app.delivery.send.comment_flow import CommentFlow
from app.delivery.send.dm_flow import DmFlow
from app.delivery.send.pacer import GivenBack, batch_settled, release_unused_grant
from app.delivery.send.scheduling import enqueue_delivery
from app.delivery.send.steps import Report, count_blocked_send, open_run
from app.instruments import DELIVERIES
from app.resources import Resources

NOT_CLAIMED = "not claimed"
_STATES = frozenset(state.value for state in LegState)


class Flow(Protocol):
    async def start(self, conn: AsyncConnection) -> bool:
        """Steps on the connection that loaded the row; False when the row needs no more."""

    async def finish(self) -> None:
        """The rest, that connection back in the pool: the calls to Meta and their records."""


async def deliver(
    resources: Resources,
    *,
    worker_id: str,
    dm_log_id: int,
    kind: TriggerKind | None = None,
    grant: int | None = None,
    public_grant: int | None = None,
) -> Report:
    """Deliver the row's due legs. `kind` is the kind the job's name stands for; the row's own
    trigger kind decides the flow, so it is not used. `grant` is the budget slot the account's
    pacer gave the row's private reply, `public_grant` its public reply's (such a job posts
    the public reply alone), when the pacer enqueued this job."""
    report = Report()
    given_back = GivenBack(None)
    async with autocommit(resources.engine) as conn:
        run = await open_run(conn, resources, report, worker_id=worker_id, dm_log_id=dm_log_id)
        if run is None:
            if grant is not None:
                given_back = await release_unused_grant(resources, dm_log_id, grant, conn=conn)
        else:
            run.grant = grant
            run.public_grant = public_grant
            if public_grant is not None:
                # The private reply has jobs of its own (or its pacer).
                run.pr_due = False
            flow: Flow = CommentFlow(run) if run.is_comment else DmFlow(run)
            go_on = await flow.start(conn)
            if run.report.private == NOT_CLAIMED:
                # Another job claimed the leg between this one's load and its claim.
                await count_blocked_send(conn, run.delivery)
    if run is None:
        if given_back.account_id is not None:
            # Once no connection is held: the pacer takes one of its own.
            await batch_settled(resources, given_back.account_id, given_back.in_flight)
        return report
    if go_on:
        await flow.finish()
    if grant is not None and not run.grant_settled:
        given_back = await release_unused_grant(
            resources, dm_log_id, grant, account_id=run.delivery.account_id
        )
        run.slots_in_flight = given_back.in_flight
    if grant is not None:
        await batch_settled(resources, run.delivery.account_id, run.slots_in_flight)
    _count_legs(run.delivery.trigger_kind, report)
    if run.next_due:
        await enqueue_delivery(
            resources.queue, dm_log_id, min(run.next_due), kind=run.delivery.trigger_kind
        )
    return report


def _count_legs(kind: str, report: Report) -> None:
    """The state each leg reached in this run, in this process's metrics."""
    for leg, state in (("private", report.private), ("public", report.public)):
        if state in _STATES:
            DELIVERIES.labels(kind, leg, state).inc()
