"""A campaign's report: what a creator shares with a client (`app.web.report`).

Only counts, never a person: the campaign, the account it answers for, and its totals.
"Comments seen" are the comments on the posts the campaign covers since it first went live,
plus any it matched; "matched" are those it won. Deliveries count by their private-reply
state; link taps come from `app.delivery_log.clicks.campaign_clicks` (a person counts once
however often they tap).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.delivery_log.clicks import CampaignClicks, campaign_clicks

# One statement: the campaign row and its counts, each an index range (comments by account
# and time, or by campaign; dm_logs by campaign).
_REPORT = text(
    """
WITH c AS (
    SELECT c.id, c.account_id, c.name, c.status, c.scope, c.media_id, c.activated_at,
           c.buttons, a.username, w.time_zone
    FROM campaigns c
    JOIN instagram_accounts a ON a.id = c.account_id
    JOIN workspaces w ON w.id = c.workspace_id
    WHERE c.id = :campaign_id AND c.workspace_id = :workspace_id
), seen AS (
    SELECT count(*) AS seen,
           count(*) FILTER (WHERE m.campaign_id = c.id AND m.outcome = 'matched') AS matched
    FROM c JOIN comments m ON m.account_id = c.account_id
    WHERE m.campaign_id = c.id
       OR (c.activated_at IS NOT NULL AND m.created_at >= c.activated_at
           AND (c.scope = 'any_post' OR m.media_id = c.media_id
                OR m.original_media_id = c.media_id))
), sent AS (
    SELECT count(*) FILTER (WHERE d.pr_state = 'SENT') AS sent,
           count(*) FILTER (WHERE d.pr_state = 'FAILED') AS failed,
           count(*) FILTER (WHERE d.pr_state = 'UNCONFIRMED') AS unconfirmed,
           count(*) FILTER (WHERE d.pr_state LIKE 'SKIPPED%') AS skipped,
           count(*) FILTER (WHERE d.pr_state IN ('PENDING', 'IN_FLIGHT')) AS waiting
    FROM dm_logs d
    WHERE d.campaign_id = :campaign_id AND d.workspace_id = :workspace_id
)
SELECT c.name, c.status, c.username, c.activated_at, c.buttons, c.time_zone,
       seen.seen, seen.matched,
       sent.sent, sent.failed, sent.unconfirmed, sent.skipped, sent.waiting
FROM c, seen, sent
"""
)


@dataclass(frozen=True, slots=True)
class CampaignReport:
    campaign_name: str
    status: str
    account_username: str | None
    live_since: datetime | None
    time_zone: str
    comments_seen: int
    comments_matched: int
    dms_sent: int
    dms_failed: int
    dms_unconfirmed: int
    dms_skipped: int
    dms_waiting: int
    clicks: CampaignClicks

    @property
    def match_rate_percent(self) -> float | None:
        return _percent(self.comments_matched, self.comments_seen)

    @property
    def sent_rate_percent(self) -> float | None:
        return _percent(self.dms_sent, self.comments_matched)


def _percent(part: int, whole: int) -> float | None:
    return round(100 * part / whole, 1) if whole else None


async def load_report(
    session: AsyncSession, *, workspace_id: int, campaign_id: int
) -> CampaignReport | None:
    """The campaign's report; None when it is not this workspace's (or is gone)."""
    params = {"workspace_id": workspace_id, "campaign_id": campaign_id}
    row = (await session.execute(_REPORT, params)).one_or_none()
    if row is None:
        return None
    clicks = await campaign_clicks(
        session, workspace_id=workspace_id, campaign_id=campaign_id, buttons=row.buttons or []
    )
    return CampaignReport(
        campaign_name=row.name,
        status=row.status,
        account_username=row.username,
        live_since=row.activated_at,
        time_zone=row.time_zone,
        comments_seen=int(row.seen),
        comments_matched=int(row.matched),
        dms_sent=int(row.sent),
        dms_failed=int(row.failed),
        dms_unconfirmed=int(row.unconfirmed),
        dms_skipped=int(row.skipped),
        dms_waiting=int(row.waiting),
        clicks=clicks,
    )
