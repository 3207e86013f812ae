"""A surge as the creator sees it: per account, the comments waiting for their private reply,
what the hourly limit allows and how it is being used, when the backlog will be through, and
how many comments will miss Instagram's 7-day window at this pace; and, counted apart, the
public replies waiting for their own hourly limit.

Waiting rows and their deadlines come from PostgreSQL; the slots used in the current window
and the account's pace (slowed or paused by Meta) from Redis (`app.delivery.send`). The
"will miss" figure assumes the waiting comments go earliest deadline first, one slot each at
the current pace, as the pacer hands them out: an estimate, said as one.

The panel tells one of four stories, `Surge.mode`: sending at the usual pace (`normal`),
slowed by Meta (`slowed`), on hold until the time Meta gave (`paused`), or `unknown` when
Redis did not answer, since then neither the pace nor the slots used can be known. Times
(sending resumes, the backlog clears) are moments, shown in the workspace's zone; they are
rounded up to the minute, so the panel never promises a minute early.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from redis.exceptions import RedisError
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.delivery.send.budget_history import account_budget, public_reply_budget
from app.delivery.send.throttle import NORMAL, PAUSED, SLOWED, Pace, Throttle
from app.resources import Resources

# Comments waiting for their private reply, and public replies waiting for their own hourly
# limit (`app.delivery.send.public_pacer`), counted apart: each a count over the pacer's own
# partial index, read from the index alone.
_WAITING = text(
    """
SELECT a.id, a.username, w.waiting, p.public_waiting
FROM instagram_accounts a
CROSS JOIN LATERAL (
    SELECT count(*) AS waiting FROM dm_logs d
    WHERE d.account_id = a.id AND d.trigger_kind = 'comment' AND d.pr_state = 'PENDING'
) w
CROSS JOIN LATERAL (
    SELECT count(*) AS public_waiting FROM dm_logs d
    WHERE d.account_id = a.id AND d.pub_state = 'PENDING' AND d.pub_queued_at IS NOT NULL
) p
WHERE a.workspace_id = :workspace_id
  AND (CAST(:account_id AS bigint) IS NULL OR a.id = CAST(:account_id AS bigint))
  AND (w.waiting > 0 OR p.public_waiting > 0)
ORDER BY a.username
"""
)
# Waiting comments in deadline order, the n-th getting its slot n slot-intervals from now.
# Only those whose deadline comes before the last one's slot can miss theirs, and they are the
# first in that order: the rest are not read (in a surge of fresh comments, none is).
_WILL_MISS = text(
    """
SELECT count(*) FROM (
    SELECT d.deadline_at, row_number() OVER (ORDER BY d.deadline_at, d.id) AS n
    FROM dm_logs d
    WHERE d.account_id = :account_id AND d.trigger_kind = 'comment' AND d.pr_state = 'PENDING'
      AND d.deadline_at < now() + make_interval(secs => :offset_s + :waiting * :slot_s)
) w
WHERE w.deadline_at < now() + make_interval(secs => :offset_s + w.n * :slot_s)
"""
)


@dataclass(frozen=True, slots=True)
class Surge:
    account_id: int
    username: str
    waiting: int
    sent_in_window: int | None  # None when Redis did not answer
    cap: int
    window_s: float
    pace: Pace
    will_miss: int
    # When the panel was read: the moments below are counted from it.
    now: datetime
    # Public replies waiting for their own hourly limit, and how it is used.
    public_waiting: int = 0
    public_sent_in_window: int | None = None
    public_cap: int = 0
    # False when Redis did not answer: the pace and the slots used are then unknown.
    known: bool = True

    @property
    def mode(self) -> str:
        """The panel's story: normal, slowed, paused or unknown."""
        return self.pace.mode if self.known else UNKNOWN

    @property
    def per_window(self) -> int:
        """Private replies the current pace allows per window."""
        return 0 if self.pace.mode == PAUSED else round(self.cap * self.pace.share)

    @property
    def after_hold_s(self) -> float | None:
        """Paused: how long the backlog takes at the usual pace once the hold is over."""
        if self.mode != PAUSED or not self.cap:
            return None
        return self.waiting / self.cap * self.window_s

    @property
    def drain_s(self) -> float | None:
        """About how long until every waiting comment is answered, from now; None when it
        cannot be said (Redis did not answer)."""
        if self.mode == UNKNOWN:
            return None
        after_hold = self.after_hold_s
        if after_hold is not None:
            return self.pace.remaining_s + after_hold
        if self.per_window == 0:
            return None
        return self.waiting / self.per_window * self.window_s

    @property
    def clears_at(self) -> datetime | None:
        """About when the last waiting comment gets its DM."""
        drain = self.drain_s
        return None if drain is None else _minute_up(self.now + timedelta(seconds=drain))

    @property
    def resumes_at(self) -> datetime | None:
        """Paused: when sending resumes; slowed: when the usual pace is due back."""
        if self.mode not in (PAUSED, SLOWED):
            return None
        return _minute_up(self.now + timedelta(seconds=self.pace.remaining_s))

    @property
    def drain_words(self) -> str:
        """How long the backlog takes: from now, or once the hold is over."""
        after_hold = self.after_hold_s
        if after_hold is not None:
            return f"{duration_words(after_hold)} after sending resumes"
        return f"{duration_words(self.drain_s)} from now"

    @property
    def pause_words(self) -> str:
        return duration_words(self.pace.remaining_s)

    @property
    def window_words(self) -> str:
        return "hour" if self.window_s == 3600 else f"{self.window_s:g} s"


UNKNOWN = "unknown"


def _minute_up(moment: datetime) -> datetime:
    """`moment` rounded up to the whole minute."""
    past = moment.second + moment.microsecond / 1_000_000
    return moment.replace(second=0, microsecond=0) + timedelta(minutes=math.ceil(past / 60))


async def load_surges(
    session: AsyncSession, resources: Resources, workspace_id: int, account_id: int | None = None
) -> list[Surge]:
    """The accounts of the workspace with comments waiting for their private reply."""
    rows = (
        await session.execute(_WAITING, {"workspace_id": workspace_id, "account_id": account_id})
    ).all()
    if not rows:
        return []
    budget = account_budget(resources)
    public = public_reply_budget(resources)
    throttle = Throttle(resources.redis, window_s=budget.window_s)
    surges = []
    for row in rows:
        used: int | None
        public_used: int | None
        known = True
        try:
            used = await budget.used(row.id)
            public_used = await public.used(row.id)
            pace = await throttle.current(row.id)
        except (RedisError, OSError):
            # The "will miss" estimate then assumes the usual pace, and says so.
            used, public_used, pace, known = None, None, Pace(NORMAL, 1.0, 0.0), False
        now = datetime.now(UTC)
        # Paused: the usual pace once the pause is over; slowed: its share of it.
        paused = pace.mode == PAUSED
        slot_s = budget.window_s / (budget.limit * (1.0 if paused else max(pace.share, 0.01)))
        missed = await session.execute(
            _WILL_MISS,
            {
                "account_id": row.id,
                "waiting": int(row.waiting),
                "slot_s": slot_s,
                "offset_s": pace.remaining_s if paused else 0.0,
            },
        )
        surges.append(
            Surge(
                account_id=row.id,
                username=row.username,
                waiting=int(row.waiting),
                sent_in_window=used,
                cap=budget.limit,
                window_s=budget.window_s,
                pace=pace,
                will_miss=int(missed.scalar() or 0),
                now=now,
                known=known,
                public_waiting=int(row.public_waiting),
                public_sent_in_window=public_used,
                public_cap=public.limit,
            )
        )
    return surges


def duration_words(seconds: float | None) -> str:
    """ "about 3 h 20 min", "about 4 min", "under a minute"."""
    if seconds is None:
        return "on hold"
    if seconds < 60:
        return "under a minute"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"about {minutes} min"
    hours, rest = divmod(minutes, 60)
    if hours >= 48:
        return f"about {round(hours / 24)} days"
    return f"about {hours} h {rest} min" if rest else f"about {hours} h"
