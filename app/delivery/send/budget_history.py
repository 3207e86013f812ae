"""The hourly budget as PostgreSQL remembers it, for rebuilding it after Redis lost it.

Every private reply Meta may have counted left a `delivery_attempts` row: in flight (no
answer yet: counted from the latest Meta could count it), sent, or ambiguous, each from when
its answer came, named after the row (`attempt_member`): the send's job, once it has recorded
the answer, stamps or gives back its slot under that name too.

A row the pacer granted a slot that has not been claimed yet had its job in the Redis that
lost the budget: the queue went with it, so the job is gone, or (taken by a worker just
before) about to confirm its slot. Its slot is rebuilt under the name it was granted
(`grant_member`), so such a job's `confirm` (and its send's `stamp`) still finds it, counted
as used since the grant, not as in flight for the rest of the grant's hold: were it in flight,
the pacer would grant no batch until those holds ran out (`GRANT_TTL_S`), two minutes of a
backlog standing still. And the grant is given up in the same statement (`pr_granted_at`
cleared), so the pacer grants the row again at once, in its deadline's place: a job that
still carries the old grant finds it replaced and sends nothing (a claim is one row's, so
never two sends). A slot whose job was lost counts until it ages out of the window: the cap
holds whatever became of it. The public replies' budget is rebuilt the same way from their own
attempts and grants (`pub_granted_at`).

Ages are computed by PostgreSQL and turned into scores by Redis, so the two clocks never have
to agree.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from sqlalchemy import TextClause, text

from app.db.engine import autocommit
from app.delivery.send.budget import GRANT_TTL_S, PUBLIC, HourlyBudget, batch_size
from app.resources import Resources

# The sends of one leg Meta may have counted: in flight, sent or ambiguous, from its
# attempts; and the rows the pacer granted a slot not yet claimed, counted as used since the
# grant, the grant given up in the same statement. `{col}` is the leg's column prefix, `{leg}`
# its attempts' leg, `{rows}` which rows of the account the leg's budget paces.
_HISTORY_SQL = """
WITH granted AS (
    SELECT d.id, d.{col}_granted_at FROM dm_logs d
    WHERE d.account_id = :account_id{rows} AND d.{col}_state = 'PENDING'
      AND d.{col}_granted_at IS NOT NULL
    FOR UPDATE
),
given_up AS (
    UPDATE dm_logs d SET {col}_granted_at = NULL
    FROM granted g WHERE d.id = g.id AND d.{col}_granted_at = g.{col}_granted_at
    RETURNING d.id, g.{col}_granted_at AS granted_at
)
SELECT 'a:' || t.id AS member,
       CASE WHEN t.finished_at IS NULL THEN -CAST(:in_flight AS bigint)
            ELSE CAST(EXTRACT(EPOCH FROM now() - t.finished_at) * 1000 AS bigint) END AS age
FROM delivery_attempts t JOIN dm_logs d ON d.id = t.dm_log_id
WHERE d.account_id = :account_id{rows} AND t.leg = '{leg}'
  AND (t.classification IS NULL OR t.classification IN ('sent', 'ambiguous'))
  AND COALESCE(t.finished_at, now()) > now() - make_interval(secs => :window)
UNION ALL
SELECT 'g:' || g.id || ':'
           || CAST(EXTRACT(EPOCH FROM g.granted_at) * 1000000 AS bigint) AS member,
       CAST(EXTRACT(EPOCH FROM now() - g.granted_at) * 1000 AS bigint) AS age
FROM given_up g
WHERE g.granted_at > now() - make_interval(secs => :window)
"""
# Private replies: only comments' rows (a DM's reply has no private-reply budget).
_HISTORY = text(
    _HISTORY_SQL.format(col="pr", leg="private_reply", rows=" AND d.trigger_kind = 'comment'")
)
_PUBLIC_HISTORY = text(_HISTORY_SQL.format(col="pub", leg="public_reply", rows=""))


def _history(
    resources: Resources, sql: TextClause, in_flight_ms: int
) -> Callable[[int, float], Awaitable[Sequence[tuple[str, int]]]]:
    """The budget's `history`: one leg's sends and grants of an account, read by `sql`."""

    async def history(account_id: int, window_s: float) -> Sequence[tuple[str, int]]:
        params = {"account_id": account_id, "window": window_s, "in_flight": in_flight_ms}
        async with autocommit(resources.engine) as conn:
            rows = await conn.execute(sql, params)
            return [(str(row.member), int(row.age)) for row in rows]

    return history


def account_budget(resources: Resources) -> HourlyBudget:
    """The private-reply budget with the settings' cap and window, rebuilt from PostgreSQL."""
    settings = resources.settings
    in_flight = in_flight_s(settings.send_timeout_s)
    return HourlyBudget(
        resources.redis,
        limit=settings.private_replies_per_hour,
        window_s=settings.private_reply_window_s,
        history=_history(resources, _HISTORY, int(in_flight * 1000)),
        in_flight_s=in_flight,
        grant_hold_s=GRANT_TTL_S,
        max_in_flight=batch_size(settings.private_replies_per_hour),
    )


def public_reply_budget(resources: Resources) -> HourlyBudget:
    """The public replies' own budget (`PUBLIC_REPLIES_PER_HOUR` over the same window),
    rebuilt from their attempts in PostgreSQL."""
    settings = resources.settings
    in_flight = settings.send_timeout_s + 5.0
    return HourlyBudget(
        resources.redis,
        limit=settings.public_replies_per_hour,
        window_s=settings.private_reply_window_s,
        history=_history(resources, _PUBLIC_HISTORY, int(in_flight * 1000)),
        in_flight_s=in_flight,
        budget=PUBLIC,
    )


def in_flight_s(send_timeout_s: float) -> float:
    """The longest a send may take: the message and its plain-text fallback, each up to the
    send timeout, and a margin."""
    return 2 * send_timeout_s + 5.0
