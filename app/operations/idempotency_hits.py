"""Counting the repeats that were absorbed: duplicate webhooks, blocked sends, repeated clicks.

Each is counted where it is absorbed, twice: in this process's Prometheus counter
(`oncereply_idempotency_hits_total{scope}`, for operators) and in an hourly bucket in
PostgreSQL (`idempotency_hits`, one upsert), which the overview sums per account and kind over
the last 24 h so that a sudden rise in upstream duplicates is visible to the creator.

Counting never stands in the way of the work it describes: a failed upsert is logged and
forgotten (the repeat was still absorbed; only the count misses it).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession, async_sessionmaker

from app.db.models import IdempotencyHitKind
from app.db.raw import Db, execute
from app.instruments import IDEMPOTENCY_HITS

logger = logging.getLogger(__name__)

_UPSERT_ONE = text(
    "INSERT INTO idempotency_hits (workspace_id, account_id, kind, hour, hits) "
    "VALUES (:workspace_id, :account_id, :kind, date_trunc('hour', now()), :hits) "
    "ON CONFLICT (workspace_id, account_id, kind, hour) "
    "DO UPDATE SET hits = idempotency_hits.hits + EXCLUDED.hits"
)
_UPSERT_MANY = (
    "INSERT INTO idempotency_hits (workspace_id, account_id, kind, hour, hits) "
    "SELECT w, a, %(kind)s, date_trunc('hour', now()), n "
    "FROM unnest(%(workspaces)s::bigint[], %(accounts)s::bigint[], %(hits)s::int[]) AS t(w, a, n) "
    "ORDER BY w, a "
    "ON CONFLICT (workspace_id, account_id, kind, hour) "
    "DO UPDATE SET hits = idempotency_hits.hits + EXCLUDED.hits"
)
_LAST_24H = text(
    "SELECT h.account_id, a.username, h.kind, sum(h.hits)::int AS hits "
    "FROM idempotency_hits h LEFT JOIN instagram_accounts a ON a.id = h.account_id "
    "WHERE h.workspace_id = :workspace_id AND h.hour > now() - interval '24 hours' "
    "GROUP BY h.account_id, a.username, h.kind "
    "ORDER BY a.username NULLS LAST, h.kind"
)


async def count_hit(
    conn: AsyncConnection,
    *,
    workspace_id: int,
    account_id: int | None,
    kind: IdempotencyHitKind,
    scope: str,
) -> None:
    """One repeat absorbed, on an autocommit connection (its own statement)."""
    IDEMPOTENCY_HITS.labels(scope).inc()
    try:
        await conn.execute(
            _UPSERT_ONE,
            {"workspace_id": workspace_id, "account_id": account_id, "kind": kind, "hits": 1},
        )
    except Exception as exc:  # noqa: BLE001 - a count must never fail the work it counts
        logger.warning("could not count a %s: %s", kind, type(exc).__name__)


async def count_button_repeat(
    sessionmaker: async_sessionmaker[AsyncSession], *, workspace_id: int | None, scope: str
) -> None:
    """A dashboard form or button sent again with the same one-time key."""
    IDEMPOTENCY_HITS.labels(scope).inc()
    if workspace_id is None:
        return
    try:
        async with sessionmaker() as session, session.begin():
            await session.execute(
                _UPSERT_ONE,
                {
                    "workspace_id": workspace_id,
                    "account_id": None,
                    "kind": IdempotencyHitKind.BUTTON_REPEAT,
                    "hits": 1,
                },
            )
    except Exception as exc:  # noqa: BLE001 - a count must never fail the work it counts
        logger.warning("could not count a repeated click: %s", type(exc).__name__)


async def count_webhook_duplicates(
    db: Db, by_account: Mapping[tuple[int, int], int], scope: str
) -> None:
    """Duplicates per (workspace, account) in the caller's transaction (the ingest's own)."""
    if not by_account:
        return
    IDEMPOTENCY_HITS.labels(scope).inc(sum(by_account.values()))
    keys = sorted(by_account)
    await execute(
        db,
        _UPSERT_MANY,
        {
            "kind": IdempotencyHitKind.WEBHOOK_DUPLICATE.value,
            "workspaces": [w for w, _ in keys],
            "accounts": [a for _, a in keys],
            "hits": [by_account[key] for key in keys],
        },
    )


@dataclass(frozen=True, slots=True)
class HitCount:
    account_id: int | None
    username: str | None
    kind: IdempotencyHitKind
    hits: int


async def hits_last_24h(session: AsyncSession, workspace_id: int) -> list[HitCount]:
    """The workspace's repeats absorbed in the last 24 h, per account and kind."""
    rows = (await session.execute(_LAST_24H, {"workspace_id": workspace_id})).all()
    return [
        HitCount(account_id, username, IdempotencyHitKind(kind), hits)
        for account_id, username, kind, hits in rows
    ]
