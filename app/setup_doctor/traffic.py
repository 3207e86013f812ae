"""What actually arrived for an account: the last event per webhook field, and how the last
week's comments reached us (by webhook, or only later by the reconciler's polling)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

# Both look back 30 days at most, so a busy account's history is never scanned in full.
_COMMENTS = text(
    """
WITH recent AS (
    SELECT first_seen_via, commenter_id, created_at FROM comments
    WHERE account_id = :account_id AND created_at > now() - interval '30 days'
), week AS (
    SELECT * FROM recent WHERE created_at > now() - interval '7 days'
), hooked AS (
    SELECT DISTINCT commenter_id FROM week
    WHERE first_seen_via = 'webhook' AND commenter_id IS NOT NULL
)
SELECT
    (SELECT max(created_at) FROM recent WHERE first_seen_via = 'webhook'),
    (SELECT count(*) FROM week WHERE first_seen_via = 'webhook'),
    (SELECT count(*) FROM week WHERE first_seen_via = 'poll'),
    (SELECT count(*) FROM hooked),
    (SELECT count(DISTINCT commenter_id) FROM week
     WHERE first_seen_via = 'poll' AND commenter_id IS NOT NULL
       AND commenter_id NOT IN (SELECT commenter_id FROM hooked))
"""
)
_MESSAGING = text(
    """
SELECT kind, max(created_at) FROM messaging_events
WHERE account_id = :account_id AND created_at > now() - interval '30 days'
GROUP BY kind
"""
)

# Which messaging ledger kinds each webhook field brings.
_FIELD_KINDS = {
    "messages": ("message", "echo"),
    "messaging_postbacks": ("postback",),
    "messaging_seen": ("read",),
}


@dataclass(frozen=True, slots=True)
class Traffic:
    last_by_field: dict[str, datetime | None]
    # The last 7 days' comments: by webhook, and found only by the reconciler.
    webhook_comments: int
    recovered_comments: int
    # People whose comments came by webhook, and people only the reconciler found.
    webhook_people: int
    people_only_recovered: int


async def load_traffic(session: AsyncSession, account_id: int) -> Traffic:
    row = (await session.execute(_COMMENTS, {"account_id": account_id})).one()
    kinds = dict((await session.execute(_MESSAGING, {"account_id": account_id})).tuples().all())
    last: dict[str, datetime | None] = {"comments": row[0]}
    for field, field_kinds in _FIELD_KINDS.items():
        seen = [kinds[k] for k in field_kinds if kinds.get(k) is not None]
        last[field] = max(seen) if seen else None
    return Traffic(
        last_by_field=last,
        webhook_comments=int(row[1]),
        recovered_comments=int(row[2]),
        webhook_people=int(row[3]),
        people_only_recovered=int(row[4]),
    )
