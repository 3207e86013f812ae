"""What a campaign's links were tapped: people, taps and previews, per button and in all.

A person is counted once per campaign however often they tap (`recipient_id`, copied from the
delivery; unique by `link_click_people`'s key), and once per button they tapped; every tap
counts in `taps`. Preview fetches are shown apart and count in neither.
The click-through rate divides people who tapped by the link DMs sent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.campaigns.message_format import buttons_of

# One statement over the kept counts (`app.clicks.rollup`), a few rows per hour with taps
# rather than a row per tap: a row per button and (GROUPING SETS) the campaign's own row,
# where a person who tapped two buttons still counts once (`people`, not `button_people`).
TAPS_BY_BUTTON = text(
    """
SELECT button,
       COALESCE(sum(taps), 0) AS taps,
       COALESCE(CASE WHEN GROUPING(button) = 0 THEN sum(button_people) ELSE sum(people) END, 0)
           AS people,
       COALESCE(sum(previews), 0) AS previews
FROM link_click_hours
WHERE workspace_id = :workspace_id AND campaign_id = :campaign_id
GROUP BY GROUPING SETS ((button), ())
ORDER BY button NULLS FIRST
"""
)
# Link DMs sent, from the kept delivery totals (`delivery_totals`, a few rows a campaign).
LINK_DMS_SENT = text(
    """
SELECT COALESCE(sum(link_sent), 0) FROM delivery_totals
WHERE workspace_id = :workspace_id AND campaign_id = :campaign_id
"""
)


@dataclass(frozen=True, slots=True)
class ButtonClicks:
    button: int
    title: str
    taps: int
    people: int


@dataclass(frozen=True, slots=True)
class CampaignClicks:
    taps: int
    people: int
    previews: int
    link_dms_sent: int
    buttons: Sequence[ButtonClicks]

    @property
    def rate_percent(self) -> float | None:
        """People who tapped, per 100 link DMs sent (None before any was sent)."""
        if not self.link_dms_sent:
            return None
        return round(100 * self.people / self.link_dms_sent, 1)


async def campaign_clicks(
    session: AsyncSession,
    *,
    workspace_id: int,
    campaign_id: int,
    buttons: Sequence[Mapping[str, Any]],
) -> CampaignClicks:
    params = {"workspace_id": workspace_id, "campaign_id": campaign_id}
    rows = (await session.execute(TAPS_BY_BUTTON, params)).all()
    sent = int((await session.execute(LINK_DMS_SENT, params)).scalar_one())
    titles = [b.title or b.url for b in buttons_of(buttons)]
    total = next((row for row in rows if row.button is None), None)
    per_button = {row.button: row for row in rows if row.button is not None}
    shown = [
        ButtonClicks(
            button=index,
            title=titles[index] if index < len(titles) else f"Button {index + 1}",
            taps=int(per_button[index].taps) if index in per_button else 0,
            people=int(per_button[index].people) if index in per_button else 0,
        )
        for index in sorted(set(range(len(titles))) | set(per_button))
    ]
    return CampaignClicks(
        taps=int(total.taps) if total else 0,
        people=int(total.people) if total else 0,
        previews=int(total.previews) if total else 0,
        link_dms_sent=sent,
        buttons=shown,
    )
