"""A surge as the creator sees it: per account, the comments waiting for their private reply,
what the hourly limit allows and how it is being used, when the backlog will be through, and
how many comments will miss Instagram's 7-day window at this pace; and, counted apart, the
public replies waiting for their own hourly limit.

Waiting rows and their deadlines come from PostgreSQL; the slots used in the current window
and the account's pace (slowed or paused by Meta) from Redis (`app.delivery.send`). The
"will miss" figure assumes the waiting comments go earliest deadline first, one slot each at
the current pace, as the pacer hands them out: an estimate, said as one.
"""

from __future__ import annotations

from dataclasses import dataclass

from redis.exceptions import RedisError
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.delivery.send.budget_history import account_budget, public_reply_budget
from app.delivery.send.throttle import NORMAL, PAUSED, Pace, Throttle
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
    # Public replies waiting for their own hourly limit, and how it is used.
    public_waiting: int = 0
    public_sent_in_window: int | None = None
    public_cap: int = 0

    @property
    def per_window(self) -> int:
        """Private replies the current pace allows per window."""
        return 0 if self.pace.mode == PAUSED else round(self.cap * self.pace.share)

    @property
    def drain_s(self) -> float | None:
        """About how long until every waiting comment is answered; None while paused."""
        if self.per_window == 0:
            return None
        return self.waiting / self.per_window * self.window_s

    @property
    def drain_words(self) -> str:
        if self.pace.mode == PAUSED and self.cap:
            # Once the hold is over, at the usual pace.
            usual_s = self.waiting / self.cap * self.window_s
            return f"after the hold, {duration_words(usual_s)}"
        return duration_words(self.drain_s)

    @property
    def pause_words(self) -> str:
        return duration_words(self.pace.remaining_s)

    @property
    def window_words(self) -> str:
        return "hour" if self.window_s == 3600 else f"{self.window_s:g} s"


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
        try:
            used = await budget.used(row.id)
            public_used = await public.used(row.id)
            pace = await throttle.current(row.id)
        except (RedisError, OSError):
            used, public_used, pace = None, None, Pace(NORMAL, 1.0, 0.0)
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
