"""Counting a workspace's people per day of taps again in its new zone, in the worker.

`link_click_days` keeps, per campaign and day of the workspace's zone, the people who tapped
a link (`app.clicks.rollup` adds to it as clicks are copied in). A change of zone marks the
workspace (`workspaces.click_days_recount_due`, set by a trigger on any UPDATE that changes
the zone, migration 0036); the `recount_click_days` job then deletes the days the funnel can
show (the last 31, local) and counts them again from the clicks of those days in the new zone.
Older days keep their counts in the old zone; no page reads them, and retention forgets them
(`app.maintenance.retention`). Until the job commits, the funnel counts its days from the
clicks themselves (`app.delivery_log.funnel`), so no page shows a day in the wrong zone.

The workspace row is locked `FOR NO KEY UPDATE` first: the click copier holds it `FOR SHARE`
while it counts, so copies in progress commit before the recount reads the clicks, and copies
after it wait for its commit. Another change of zone meanwhile waits too, then marks the row
again, and the next run counts in that zone. A run on a workspace not marked does nothing.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

# 33 days of clicks hold every click of a local day from `first_day` on, in any zone.
_RECOUNT = (
    text("""
SELECT zone_or_utc(time_zone) AS zone,
       (now() AT TIME ZONE zone_or_utc(time_zone))::date - 31 AS first_day
FROM workspaces WHERE id = :workspace_id AND click_days_recount_due
FOR NO KEY UPDATE
"""),
    text("""
DELETE FROM link_click_day_people p USING campaigns c
WHERE c.id = p.campaign_id AND c.workspace_id = :workspace_id AND p.day >= :first_day
"""),
    text("DELETE FROM link_click_days WHERE workspace_id = :workspace_id AND day >= :first_day"),
    text("""
WITH person AS (
    INSERT INTO link_click_day_people (campaign_id, day, recipient_id)
    SELECT DISTINCT l.campaign_id, (l.clicked_at AT TIME ZONE :zone)::date, l.recipient_id
    FROM link_clicks l
    WHERE l.workspace_id = :workspace_id AND l.clicked_at >= now() - interval '33 days'
      AND (l.clicked_at AT TIME ZONE :zone)::date >= :first_day AND l.visit = 'click'
      AND l.campaign_id IS NOT NULL AND l.recipient_id IS NOT NULL
    ON CONFLICT DO NOTHING
    RETURNING campaign_id, day
)
INSERT INTO link_click_days (campaign_id, day, workspace_id, people)
SELECT campaign_id, day, :workspace_id, count(*) FROM person
GROUP BY campaign_id, day
ORDER BY campaign_id, day
ON CONFLICT (campaign_id, day) DO UPDATE SET people = link_click_days.people + excluded.people
"""),
    text("UPDATE workspaces SET click_days_recount_due = false WHERE id = :workspace_id"),
)
_DUE = text("SELECT id FROM workspaces WHERE click_days_recount_due ORDER BY id LIMIT :limit")


async def recount_click_days(session: AsyncSession, workspace_id: int) -> bool:
    """Count the workspace's recent days again in its zone if a change of zone marked it (in
    the caller's transaction); whether it did."""
    lock, *steps = _RECOUNT
    row = (await session.execute(lock, {"workspace_id": workspace_id})).one_or_none()
    if row is None:
        return False
    params = {"workspace_id": workspace_id, "zone": row.zone, "first_day": row.first_day}
    for step in steps:
        await session.execute(step, params)
    return True


async def recounts_due(session: AsyncSession, limit: int = 100) -> list[int]:
    """Workspaces whose days wait to be counted again (a job lost between the change's commit
    and its enqueue is found here by the cron)."""
    return list((await session.execute(_DUE, {"limit": limit})).scalars())
