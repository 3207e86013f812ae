"""The overview's numbers: today's deliveries per account, blocked duplicates, recent events.

"Today" is the workspace's day: from midnight in its time zone (the caller passes `day`, see
`app.workspaces.time_zone.start_of_day`). Counts are of the deliveries *created* today by their
current private-reply state, summed per account from today's kept counts (`delivery_counts`,
over `ix_delivery_counts_ws_quarter`).

"Duplicate sends blocked" counts only what the data proves:
- `same_person`: rows settled SKIPPED_DEDUP — the campaign had already messaged that person,
  and the (campaign, person) claim stopped a second DM;
- `proven_delivered`: rows whose answer from Instagram was lost (UNCONFIRMED) and that were
  later proven delivered — found in the conversation, or a retry answered "this comment already
  has its private reply" (100/2534025) — so nothing was sent twice;

"Repeats absorbed" (the last 24 h, per account and kind, from `idempotency_hits`): comments
Instagram sent again in a webhook (ingest counts them per account, as it finds their ledger
row), delivery jobs for a leg another job already sent or was sending, and dashboard buttons
submitted twice (the workspace's, not an account's). A sudden rise in the first says Meta is
redelivering more than usual.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncSession

from app.accounts.cards import AccountCard, list_accounts
from app.db.models import EventLevel, IdempotencyHitKind, LegState, OperationalEvent
from app.delivery_log.kept_counts import COLUMN_STATES
from app.operations.idempotency_hits import HitCount, hits_last_24h

RECENT_EVENTS = 15

# Today's deliveries per account, from the kept counts (a day in any zone is a whole number of
# 15-minute slices).
_TODAY = text(
    "SELECT account_id, "  # noqa: S608 - column names from the LegState enum
    + ", ".join(
        f"sum({column}) AS {column}" for column in (*COLUMN_STATES, "proven", "proven_by_meta")
    )
    + " FROM delivery_counts WHERE workspace_id = :workspace_id AND quarter >= :day"
    + " GROUP BY account_id"
)


@dataclass(slots=True)
class DayCounts:
    sent: int = 0
    failed: int = 0
    unconfirmed: int = 0
    skipped: int = 0
    waiting: int = 0  # PENDING or IN_FLIGHT

    def add(self, state: LegState, count: int) -> None:
        if state is LegState.SENT:
            self.sent += count
        elif state is LegState.FAILED:
            self.failed += count
        elif state is LegState.UNCONFIRMED:
            self.unconfirmed += count
        elif state.is_skip:
            self.skipped += count
        else:
            self.waiting += count

    @property
    def total(self) -> int:
        return self.sent + self.failed + self.unconfirmed + self.skipped + self.waiting


@dataclass(slots=True)
class Duplicates:
    same_person: int = 0
    proven_delivered: int = 0
    confirmed_by_meta: int = 0  # of proven_delivered: by the 2534025 answer to a retry

    @property
    def in_workspace(self) -> int:
        return self.same_person + self.proven_delivered


@dataclass(frozen=True, slots=True)
class EventRow:
    created_at: datetime
    level: EventLevel
    kind: str
    message: str
    account_id: int | None


@dataclass(slots=True)
class Repeats:
    """Repeats absorbed in the last 24 h for one account (None: the dashboard's buttons)."""

    account_id: int | None
    username: str | None
    webhook_duplicates: int = 0
    sends_blocked: int = 0
    button_repeats: int = 0


def repeats_by_account(hits: list[HitCount]) -> list[Repeats]:
    rows: dict[int | None, Repeats] = {}
    for hit in hits:
        row = rows.setdefault(hit.account_id, Repeats(hit.account_id, hit.username))
        if hit.kind is IdempotencyHitKind.WEBHOOK_DUPLICATE:
            row.webhook_duplicates += hit.hits
        elif hit.kind is IdempotencyHitKind.SEND_BLOCKED:
            row.sends_blocked += hit.hits
        else:
            row.button_repeats += hit.hits
    return sorted(rows.values(), key=lambda r: (r.account_id is None, r.username or ""))


@dataclass(slots=True)
class Overview:
    day: datetime
    accounts: list[AccountCard]
    per_account: dict[int, DayCounts] = field(default_factory=dict)
    totals: DayCounts = field(default_factory=DayCounts)
    duplicates: Duplicates = field(default_factory=Duplicates)
    events: list[EventRow] = field(default_factory=list)
    # Duplicate webhooks absorbed, duplicate sends blocked, repeated clicks: last 24 h.
    repeats: list[Repeats] = field(default_factory=list)

    def counts_for(self, account_id: int) -> DayCounts:
        return self.per_account.get(account_id) or DayCounts()


async def load_overview(session: AsyncSession, workspace_id: int, day: datetime) -> Overview:
    overview = Overview(day=day, accounts=await list_accounts(session, workspace_id))
    rows = await session.execute(_TODAY, {"workspace_id": workspace_id, "day": day})
    for row in rows:
        counts = overview.per_account.setdefault(row.account_id, DayCounts())
        for column, states in COLUMN_STATES.items():
            # A column's states are all of one kind here (PENDING and IN_FLIGHT: waiting).
            count = int(getattr(row, column))
            counts.add(states[0], count)
            overview.totals.add(states[0], count)
        overview.duplicates.same_person += int(row.skipped_dedup)
        overview.duplicates.proven_delivered += int(row.proven)
        overview.duplicates.confirmed_by_meta += int(row.proven_by_meta)
    events = await session.execute(
        select(
            OperationalEvent.created_at,
            OperationalEvent.level,
            OperationalEvent.kind,
            OperationalEvent.message,
            OperationalEvent.account_id,
        )
        # Only this workspace's own events: server-wide ones (refused webhooks, Meta's
        # callbacks) are for the operator, in the log and the events table, and their text
        # may come from another tenant's payload.
        .where(OperationalEvent.workspace_id == workspace_id)
        .order_by(OperationalEvent.created_at.desc(), OperationalEvent.id.desc())
        .limit(RECENT_EVENTS)
    )
    overview.events = [EventRow(*row) for row in events.tuples()]
    overview.repeats = repeats_by_account(await hits_last_24h(session, workspace_id))
    return overview
