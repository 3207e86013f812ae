"""A campaign's report: what a creator shares with a client (`app.web.report`).

Only counts, never a person: the campaign, the account it answers for, its funnel
(`app.delivery_log.funnel.campaign_funnel`: comments seen, matched, DMs sent, people who
tapped a link, per button, per day, and the misses) and its DMs and taps over time
(`app.delivery_log.charts.timeline`), as the campaign page shows them. The headline numbers
are read from that funnel, so the page states one number per fact: the DMs refused, skipped
or still being checked are its "matched, DM not sent" by state, the taps in all the sum of
its buttons' taps.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, tzinfo

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Campaign, InstagramAccount, LegState
from app.delivery_log.charts import Span, Timeline, timeline
from app.delivery_log.funnel import Funnel, campaign_funnel
from app.delivery_log.kept_counts import UNSETTLED, column_code


@dataclass(frozen=True, slots=True)
class CampaignReport:
    campaign_name: str
    status: str
    account_username: str | None
    live_since: datetime | None
    funnel: Funnel
    timeline: Timeline
    taps: int
    failed: int
    skipped: int
    unconfirmed: int
    waiting: int


def _not_sent(funnel: Funnel, wanted: set[str]) -> int:
    return sum(miss.count for miss in funnel.not_sent if miss.code in wanted)


_SKIPPED = {state.value for state in LegState if state.is_skip}
_WAITING = {column_code(UNSETTLED)}


async def load_report(
    session: AsyncSession,
    *,
    workspace_id: int,
    campaign_id: int,
    span: Span,
    zone: tzinfo,
    now: datetime,
) -> CampaignReport | None:
    """The campaign's report, its charts over `span`, its hours and days in `zone`; None when
    the campaign is not this workspace's (or is gone)."""
    row = (
        await session.execute(
            select(Campaign, InstagramAccount.username)
            .join(InstagramAccount, InstagramAccount.id == Campaign.account_id)
            .where(Campaign.id == campaign_id, Campaign.workspace_id == workspace_id)
        )
    ).one_or_none()
    if row is None:
        return None
    campaign, username = row
    funnel = await campaign_funnel(session, campaign, zone=zone, now=now)
    chart = await timeline(
        session, workspace_id=workspace_id, campaign_id=campaign_id, span=span, zone=zone, now=now
    )
    return CampaignReport(
        campaign_name=campaign.name,
        status=campaign.status.value,
        account_username=username,
        live_since=campaign.activated_at,
        funnel=funnel,
        timeline=chart,
        taps=sum(button.taps for button in funnel.buttons),
        failed=_not_sent(funnel, {LegState.FAILED.value}),
        skipped=_not_sent(funnel, _SKIPPED),
        unconfirmed=_not_sent(funnel, {LegState.UNCONFIRMED.value}),
        waiting=_not_sent(funnel, _WAITING),
    )
