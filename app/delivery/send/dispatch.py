"""Running a delivery job: the comment flow or the DM flow, whichever the row needs.

Every delivery job (`process_comment`, `process_message`, `process_postback`,
`send_follow_up`) calls `deliver` with the kind its name stands for. That flow runs first; a
row of the other kind is handed over (the dashboard's retry enqueues `process_comment` for any
row it retries), so no job name can leave a row undelivered, and the common case costs
nothing extra.
"""

from __future__ import annotations

from app.db.models import TriggerKind
from app.delivery.send.comment_flow import process_comment
from app.delivery.send.dm_flow import process_dm
from app.delivery.send.steps import Report
from app.resources import Resources


async def deliver(
    resources: Resources, *, worker_id: str, dm_log_id: int, kind: TriggerKind
) -> Report:
    first, second = (
        (process_comment, process_dm)
        if kind is TriggerKind.COMMENT
        else (process_dm, process_comment)
    )
    report = await first(resources, worker_id=worker_id, dm_log_id=dm_log_id)
    if report.wrong_flow:
        report = await second(resources, worker_id=worker_id, dm_log_id=dm_log_id)
    return report
