"""A campaign's funnel: from the comments it saw to the people who tapped its link.

The steps, each counted from the rows that prove it:

- seen: comments the campaign looked at while live, on a post it watches (its verdict in the
  ledger's decision is won, lost, excluded or no keyword), plus the DMs, story replies and
  story mentions that fired it;
- matched: its deliveries for any of those (`dm_logs` rows but taps' answers and follow-ups);
- sent: those deliveries whose first DM is SENT;
- tapped: people who tapped the opening DM's button (tap rows whose payload ends `:open`);
  shown when the campaign has an opening DM (or had one: taps exist);
- passed: people who got the link (`reveal` SENT, whatever brought them): with the follow
  gate on only a follower gets it; shown when the gate is on;
- clicked: people who tapped a link (a person's visits, once per person: `link_click_hours`'
  kept count in all; day by day once per person and day, `link_click_days`' kept count).

Seen, matched and sent count comments and deliveries; the later steps count people, once each
(a person who commented twice is one person). The rate of a step is of the step before it.

Per day (the workspace's time zone, the last `DAYS` days): each step on the day it happened:
comments and deliveries by the day their row was made (a tap's row is made when the tap comes
in), the people who tapped the opening DM or got the link on the day of the delivery that first
counted them (so those days add up to the total), and the people who tapped a link on each day
they tapped: one who tapped on Monday and on Tuesday is one of Monday's people and one of
Tuesday's, as a creator reads "people who tapped a link that day" (so those days do not add up
to the total, which counts each person once). Such a count cannot be summed from fixed UTC
buckets for every zone, so the people of each day are kept for the workspace's zone as clicks
come in, and the last 31 days are counted again from their clicks by the worker when the zone
changes (`app.db.models.clicks.LinkClickDay`, `app.clicks.day_recount`).

Per button: the people who tapped it, per 100 people the link went to.

Next to it, the misses: comments the campaign saw and did not answer, by its verdict
(`app.delivery_log.misses.VERDICTS`), and deliveries matched but not sent, by their state
(`app.delivery_log.words.STATE_WORDS`; those waiting to be sent and those being sent as one,
as the kept counts hold them).

Deliveries, and the people who tapped the opening DM or got the link, are summed from the kept
counts (`delivery_totals` in all, `delivery_counts`' 15-minute slices by day, see
`app.db.models.delivery_counts`).
Every statement reads one campaign's slice through an index: `uq_delivery_totals_key`,
`uq_delivery_counts_key`,
`pk_link_click_hours`, `pk_link_click_days` (the day window only), and
`pk_comment_verdict_totals` and `pk_comment_verdict_counts`: the comments seen are never read
from the ledger itself but from the counts the database keeps per campaign and verdict, in all
and per UTC quarter hour, as the ledger's decisions are written, re-written or deleted
(`app.db.models.ledger.CommentVerdictTotal`, `CommentVerdictCount`).
Totals come from one plain aggregate per table over the campaign's rows; the days from a second
statement over the window's index range only, so no statement sorts every row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta, tzinfo
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Campaign, LegState
from app.delivery_log.clicks import ButtonClicks, campaign_clicks
from app.delivery_log.kept_counts import COLUMN_STATES, DELIVERIES, column_code
from app.delivery_log.misses import VERDICTS
from app.delivery_log.words import STATE_WORDS, UNSETTLED_WORDS

DAYS = 30
# The campaign's verdicts on a comment on a post it watched, while live.
SEEN_VERDICTS = ("won", "lost", "excluded", "no_keyword")
DELIVERY_KEYS = ("dm_triggers", "matched", "sent", "tapped", "passed")

STEP_WORDS: dict[str, str] = {
    "seen": "Comments seen",
    "matched": "Matched a keyword",
    "sent": "DM sent",
    "tapped": "Tapped the opening DM",
    "passed": "Passed the follow gate",
    "clicked": "Tapped a link",
}
# What a step counts, after its number (one, many).
STEP_UNITS: dict[str, tuple[str, str]] = {
    "seen": ("comment", "comments"),
    "matched": ("comment", "comments"),
    "sent": ("DM", "DMs"),
    "tapped": ("person", "people"),
    "passed": ("person", "people"),
    "clicked": ("person", "people"),
}

# The ledger's comments this campaign considered in scope, by its verdict: in all from the
# totals the database keeps per (campaign, verdict) as decisions are written
# (`CommentVerdictTotal`, four rows), per day from its counts per UTC quarter hour
# (`CommentVerdictCount`, a few rows per quarter hour of the window).
_SEEN = text(
    """
SELECT verdict, sum(comments) AS n FROM comment_verdict_totals
WHERE campaign_id = :campaign_id
GROUP BY verdict
"""
)
# A local day in any zone is whole quarter hours, so each quarter lands in its own day.
_SEEN_DAYS = text(
    """
SELECT date_trunc('day', quarter AT TIME ZONE :tz)::date AS day, sum(comments) AS n
FROM comment_verdict_counts
WHERE campaign_id = :campaign_id AND quarter >= :window_start
GROUP BY 1
"""
)
# The campaign's deliveries from the kept counts (`app.delivery_log.kept_counts`), its totals
# (`delivery_totals`, a few rows) and its 15-minute slices (`delivery_counts`): matches
# (deliveries but taps' answers and follow-ups), first DMs sent, people new to the tapped and
# passed steps, and the matches not sent by state; in all, and per day of the window (a local
# day is a whole number of slices in every zone).
_DELIVERY_COUNTS = f"""
       COALESCE(sum(dm_triggers), 0) AS dm_triggers,
       COALESCE(sum({DELIVERIES}) FILTER (WHERE NOT follow_on), 0) AS matched,
       COALESCE(sum(sent) FILTER (WHERE NOT follow_on), 0) AS sent,
       COALESCE(sum(tapped_people), 0) AS tapped,
       COALESCE(sum(passed_people), 0) AS passed"""
_DELIVERIES = text(
    "SELECT"
    + _DELIVERY_COUNTS
    + "".join(
        f", COALESCE(sum({column}) FILTER (WHERE NOT follow_on), 0) AS {column}"
        for column, states in COLUMN_STATES.items()
        if states != (LegState.SENT,)
    )
    + """
FROM delivery_totals
WHERE workspace_id = :workspace_id AND campaign_id = :campaign_id
"""
)
_DELIVERY_DAYS = text(
    """
SELECT date_trunc('day', quarter AT TIME ZONE :tz)::date AS day,"""
    + _DELIVERY_COUNTS
    + """
FROM delivery_counts
WHERE workspace_id = :workspace_id AND campaign_id = :campaign_id
  AND quarter >= :window_start
GROUP BY 1
"""
)
# People who tapped: in all from the kept counts (each person once by `link_click_people`'s
# key, summed from a few rows per hour); per day from the people kept per day of the
# workspace's zone (`link_click_days`, one row a day). Should the funnel be asked for another
# zone than the one those days are kept in, or those days wait to be counted again in a new
# zone (`app.clicks.day_recount`), its days come from the window's raw rows instead.
_CLICKED = text(
    """
SELECT COALESCE(sum(people), 0) FROM link_click_hours
WHERE workspace_id = :workspace_id AND campaign_id = :campaign_id
"""
)
_CLICKED_DAYS = text(
    """
WITH kept AS (
    SELECT COALESCE(bool_or(zone_or_utc(time_zone) = :tz AND NOT click_days_recount_due), false)
           AS in_zone
    FROM workspaces WHERE id = :workspace_id
)
SELECT day, people FROM link_click_days
WHERE campaign_id = :campaign_id AND workspace_id = :workspace_id AND day >= :first_day
  AND (SELECT in_zone FROM kept)
UNION ALL
SELECT date_trunc('day', clicked_at AT TIME ZONE :tz)::date, count(DISTINCT recipient_id)
FROM link_clicks
WHERE campaign_id = :campaign_id AND workspace_id = :workspace_id
  AND clicked_at >= :window_start AND visit = 'click' AND NOT (SELECT in_zone FROM kept)
GROUP BY 1
"""
)


@dataclass(frozen=True, slots=True)
class Step:
    key: str
    count: int
    # Of the step before, in percent (None for the first step, or after a zero).
    rate_percent: float | None

    @property
    def words(self) -> str:
        return STEP_WORDS[self.key]

    @property
    def unit(self) -> str:
        one, many = STEP_UNITS[self.key]
        return one if self.count == 1 else many


@dataclass(frozen=True, slots=True)
class FunnelDay:
    day: date
    counts: Mapping[str, int]


@dataclass(frozen=True, slots=True)
class MissCount:
    words: str
    count: int
    code: str  # the verdict or the state, for the page's data attributes


@dataclass(frozen=True, slots=True)
class ButtonStep:
    title: str
    people: int
    taps: int
    # People who tapped this button, per 100 people the link went to.
    rate_percent: float | None


@dataclass(slots=True)
class Funnel:
    steps: list[Step]
    # The IANA name of the zone its days are in.
    zone: str
    # Newest first; only days on which something happened.
    days: list[FunnelDay] = field(default_factory=list)
    buttons: list[ButtonStep] = field(default_factory=list)
    # Comments seen and not answered, by the campaign's verdict.
    unanswered: list[MissCount] = field(default_factory=list)
    # Deliveries matched and not sent, by their state.
    not_sent: list[MissCount] = field(default_factory=list)
    with_dm_triggers: bool = False

    @property
    def keys(self) -> list[str]:
        return [step.key for step in self.steps]

    def count(self, key: str) -> int:
        return next((step.count for step in self.steps if step.key == key), 0)


def rate(part: int, whole: int) -> float | None:
    return round(100 * part / whole, 1) if whole else None


def zone_key(zone: tzinfo) -> str:
    """The IANA name PostgreSQL buckets by (`datetime.UTC` has none: "UTC")."""
    return str(getattr(zone, "key", "UTC"))


def window_start(zone: tzinfo, now: datetime, days: int = DAYS) -> datetime:
    """Midnight `days - 1` days before today, in the zone: the per-day table's first day."""
    first = now.astimezone(zone).date() - timedelta(days=days - 1)
    return datetime.combine(first, time.min, zone)


async def campaign_funnel(
    session: AsyncSession,
    campaign: Campaign,
    *,
    zone: tzinfo,
    now: datetime,
    days: int = DAYS,
) -> Funnel:
    """The funnel of `campaign` (see the module docstring), its days in `zone` (the
    workspace's, a zone PostgreSQL knows by the same name, or UTC)."""
    params: dict[str, Any] = {
        "workspace_id": campaign.workspace_id,
        "campaign_id": campaign.id,
        "tz": zone_key(zone),
        "window_start": window_start(zone, now, days),
    }
    params["first_day"] = params["window_start"].date()
    per_day: dict[date, dict[str, int]] = {}

    def note(day: date | None, key: str, value: int) -> None:
        if day is not None and value:
            counts = per_day.setdefault(day, {})
            counts[key] = counts.get(key, 0) + value

    verdicts = dict.fromkeys(SEEN_VERDICTS, 0)
    for row in (await session.execute(_SEEN, params)).all():
        if row.verdict in verdicts:
            verdicts[row.verdict] = int(row.n)
    for row in (await session.execute(_SEEN_DAYS, params)).all():
        note(row.day, "seen", int(row.n))

    total = (await session.execute(_DELIVERIES, params)).one()
    totals = {key: int(getattr(total, key)) for key in DELIVERY_KEYS}
    for row in (await session.execute(_DELIVERY_DAYS, params)).all():
        note(row.day, "seen", int(row.dm_triggers))
        for key in ("matched", "sent", "tapped", "passed"):
            note(row.day, key, int(getattr(row, key)))
    clicked = int((await session.execute(_CLICKED, params)).scalar_one())
    for row in (await session.execute(_CLICKED_DAYS, params)).all():
        note(row.day, "clicked", int(row.people))

    counts = {
        "seen": sum(verdicts.values()) + totals.get("dm_triggers", 0),
        "matched": totals.get("matched", 0),
        "sent": totals.get("sent", 0),
        "tapped": totals.get("tapped", 0),
        "passed": totals.get("passed", 0),
        "clicked": clicked,
    }
    keys = ["seen", "matched", "sent"]
    if campaign.opening_dm_enabled or counts["tapped"]:
        keys.append("tapped")
    if campaign.follow_gate_enabled:
        keys.append("passed")
    keys.append("clicked")
    steps = [
        Step(key, counts[key], rate(counts[key], counts[keys[i - 1]]) if i else None)
        for i, key in enumerate(keys)
    ]

    clicks = await campaign_clicks(
        session,
        workspace_id=campaign.workspace_id,
        campaign_id=campaign.id,
        buttons=campaign.buttons,
    )
    return Funnel(
        steps=steps,
        zone=params["tz"],
        days=[
            FunnelDay(day, {key: per_day[day].get(key, 0) for key in keys})
            for day in sorted(per_day, reverse=True)
        ],
        # `passed` counts everyone the link went to, gate or not.
        buttons=_buttons(clicks.buttons, counts["passed"]),
        unanswered=[
            MissCount(VERDICTS[verdict], verdicts[verdict], verdict)
            for verdict in SEEN_VERDICTS[1:]
            if verdicts.get(verdict)
        ],
        not_sent=sorted(
            (
                MissCount(_state_words(states), n, column_code(column))
                for column, states in COLUMN_STATES.items()
                if states != (LegState.SENT,) and (n := int(getattr(total, column)))
            ),
            key=lambda miss: -miss.count,
        ),
        with_dm_triggers=bool(campaign.dm_trigger_enabled or totals.get("dm_triggers")),
    )


def _state_words(states: tuple[LegState, ...]) -> str:
    """The words for a kept count's states: a state's own, or PENDING and IN_FLIGHT as one."""
    return STATE_WORDS[states[0]] if len(states) == 1 else UNSETTLED_WORDS


def _buttons(buttons: Sequence[ButtonClicks], link_people: int) -> list[ButtonStep]:
    return [ButtonStep(b.title, b.people, b.taps, rate(b.people, link_people)) for b in buttons]
