"""The one statement that records clicks and keeps their counts: `insert_clicks_sql`.

Counting a campaign's taps row by row took ~2 s at 400,000 taps, so the dashboard reads
counts kept as the clicks arrive. One statement, so a batch is recorded with its counts or
not at all (a retried batch cannot count twice):

1. the visits go into `link_clicks`, `ON CONFLICT (click_key) DO NOTHING` — a visit already
   there (a replayed request, a segment copied twice) goes no further;
2. the people among the new clicks go into `link_click_people` (per campaign) and
   `link_click_button_people` (per button), `ON CONFLICT DO NOTHING`: only a person the key
   has not seen comes back from `RETURNING`, so two processes copying the same person at
   once count them once;
3. `link_click_hours` gains the new taps, previews and people of each (campaign, hour,
   button), one upsert row each (`taps = taps + excluded.taps`), in key order so that two
   concurrent copies lock rows in the same order. (Should two copies still deadlock — one
   replayed request in both, met in opposite orders — PostgreSQL cancels one statement,
   whole, and its file is copied again on the next round.)
4. `link_click_quarters` gains the new taps of each (campaign, 15-minute UTC slice, button),
   the same way: the charts' taps, whose local buckets are whole slices in every zone. Its
   rows are no more contended than the hour rows the statement locks anyway (a slice is
   within one hour, of one button), so they are not striped;
5. the people of each (campaign, day) go into `link_click_day_people`, the day in the
   workspace's time zone (read from its row, held `FOR SHARE` so that the recount after a
   change of zone, `app.clicks.day_recount`, never interleaves with a copy), `ON CONFLICT DO
   NOTHING`;
   `link_click_days` gains one person per new key: the funnel's people per day.

The source of the visits is a relation with the columns `(click_key, dm_log_id, button,
visit, clicked_at)`: `UNNEST_SOURCE` for the recorder's arrays; the query benchmark passes a
`generate_series` of its own through the very same statement. The person, campaign and
workspace come from the delivery (`JOIN dm_logs`); a click whose delivery was deleted since
has nothing to count against and is dropped. Hours are UTC hours (`date_trunc(…, 'UTC')`),
whatever the session's time zone.
"""

from __future__ import annotations

UNNEST_SOURCE = (
    "unnest(%(keys)s::bytea[], %(ids)s::bigint[], %(buttons)s::smallint[], "
    "%(visits)s::text[], %(ats)s::timestamptz[]) "
    "AS u(click_key, dm_log_id, button, visit, clicked_at)"
)

_TEMPLATE = """
WITH new AS (
    INSERT INTO link_clicks
        (click_key, dm_log_id, workspace_id, campaign_id, recipient_id, button, visit, clicked_at)
    SELECT u.click_key, d.id, d.workspace_id, d.campaign_id, d.recipient_id, u.button, u.visit,
           u.clicked_at
    FROM {source}
    JOIN dm_logs d ON d.id = u.dm_log_id
    ON CONFLICT (click_key) DO NOTHING
    RETURNING workspace_id, campaign_id, recipient_id, button, visit, clicked_at
), counted AS (
    SELECT * FROM new WHERE campaign_id IS NOT NULL
), person AS (
    INSERT INTO link_click_people (campaign_id, recipient_id, button, first_clicked_at)
    SELECT DISTINCT ON (campaign_id, recipient_id) campaign_id, recipient_id, button, clicked_at
    FROM counted WHERE visit = 'click' AND recipient_id IS NOT NULL
    ORDER BY campaign_id, recipient_id, clicked_at, button
    ON CONFLICT DO NOTHING
    RETURNING campaign_id, button, first_clicked_at
), button_person AS (
    INSERT INTO link_click_button_people (campaign_id, button, recipient_id, first_clicked_at)
    SELECT DISTINCT ON (campaign_id, button, recipient_id)
           campaign_id, button, recipient_id, clicked_at
    FROM counted WHERE visit = 'click' AND recipient_id IS NOT NULL
    ORDER BY campaign_id, button, recipient_id, clicked_at
    ON CONFLICT DO NOTHING
    RETURNING campaign_id, button, first_clicked_at
), zones AS (
    -- Held FOR SHARE to the commit: the recount after a change of the workspace's zone
    -- (app.clicks.day_recount) waits for this copy, or this copy waits for it.
    SELECT w.id AS workspace_id, zone_or_utc(w.time_zone) AS zone
    FROM workspaces w WHERE w.id IN (SELECT workspace_id FROM counted)
    FOR SHARE OF w
), day_person AS (
    INSERT INTO link_click_day_people (campaign_id, day, recipient_id)
    SELECT DISTINCT c.campaign_id, (c.clicked_at AT TIME ZONE z.zone)::date, c.recipient_id
    FROM counted c JOIN zones z ON z.workspace_id = c.workspace_id
    WHERE c.visit = 'click' AND c.recipient_id IS NOT NULL
    ORDER BY 1, 2, 3
    ON CONFLICT DO NOTHING
    RETURNING campaign_id, day
), days AS (
    INSERT INTO link_click_days (campaign_id, day, workspace_id, people)
    SELECT p.campaign_id, p.day, k.workspace_id, count(*)
    FROM day_person p JOIN campaigns k ON k.id = p.campaign_id
    GROUP BY p.campaign_id, p.day, k.workspace_id
    ORDER BY p.campaign_id, p.day
    ON CONFLICT (campaign_id, day) DO UPDATE SET people = link_click_days.people + excluded.people
), quarters AS (
    INSERT INTO link_click_quarters (campaign_id, quarter, button, workspace_id, taps)
    SELECT campaign_id, date_bin('15 minutes', clicked_at, TIMESTAMPTZ '2000-01-01 00:00+00'),
           button, max(workspace_id), count(*)
    FROM counted WHERE visit = 'click'
    GROUP BY 1, 2, 3
    ORDER BY 1, 2, 3
    ON CONFLICT (campaign_id, quarter, button) DO UPDATE
        SET taps = link_click_quarters.taps + excluded.taps
), deltas AS (
    SELECT campaign_id, date_trunc('hour', clicked_at, 'UTC') AS hour, button, workspace_id,
           (visit = 'click')::int AS taps, (visit = 'preview')::int AS previews,
           0 AS people, 0 AS button_people
    FROM counted
    UNION ALL
    SELECT campaign_id, date_trunc('hour', first_clicked_at, 'UTC'), button, NULL, 0, 0, 1, 0
    FROM person
    UNION ALL
    SELECT campaign_id, date_trunc('hour', first_clicked_at, 'UTC'), button, NULL, 0, 0, 0, 1
    FROM button_person
)
INSERT INTO link_click_hours
    (campaign_id, hour, button, workspace_id, taps, previews, people, button_people)
-- A new person's first tap is itself among the new clicks of its (campaign, hour, button),
-- so each group has the workspace from that click.
SELECT campaign_id, hour, button, max(workspace_id), sum(taps), sum(previews), sum(people),
       sum(button_people)
FROM deltas
GROUP BY campaign_id, hour, button
ORDER BY campaign_id, hour, button
ON CONFLICT (campaign_id, hour, button) DO UPDATE SET
    taps = link_click_hours.taps + excluded.taps,
    previews = link_click_hours.previews + excluded.previews,
    people = link_click_hours.people + excluded.people,
    button_people = link_click_hours.button_people + excluded.button_people
"""


def insert_clicks_sql(source: str) -> str:
    """The statement over `source`, a constant SQL relation named `u` (never user input)."""
    return _TEMPLATE.format(source=source)
