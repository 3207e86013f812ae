"""Ingest: a batch of stored webhook events → ledger rows → PENDING deliveries.

Durable before anything is sent. One transaction per batch of events:

1. lock the events still `received`/`enqueued` (`FOR UPDATE SKIP LOCKED`: a concurrent
   job for the same events skips them; a processed event is never touched again);
2. parse every body into comments, messaging items and problems (`webhook_payload`);
3. load the accounts involved and their active campaigns in one query;
4. write the comments (`comments`: ledger rows, and a PENDING `dm_logs` row for each new
   matched comment) and the messaging items (`messaging_events`: ledger rows) — each kind in
   one multi-row statement, whatever the batch size;
5. turn button taps and DM keyword triggers into work (`triggers`): a tap's
   `postback_deliveries` claim and its `dm_logs` row, a DM's `dm_logs` row — also one
   statement per kind;
6. mark each event `processed` (item count, what became of its items) or `rejected` (why).

After the commit, each new `dm_logs` row gets one delivery job keyed `deliver:<id>`
(`process_comment`, `process_postback`, `process_message`: `enqueue_ingested`). Enqueueing
can fail (Redis down): the rows are already PENDING and the due-work relay finds them.
Re-running an event changes nothing: the unique keys are the dedupe.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from saq import Queue

from app.campaigns.rules import AccountRules, load_account_rules
from app.db.engine import autocommit
from app.db.models import SeenVia, TriggerKind, WebhookStatus
from app.db.raw import Db, execute, fetch_tuples
from app.delivery.intake import triggers
from app.delivery.intake.bulk import columns_of, unnest_arrays
from app.delivery.intake.comments import enqueue_deliveries, ingest_comment_batch
from app.delivery.intake.messaging_events import record_messaging
from app.delivery.send.budget_history import account_budget
from app.delivery.send.pacer import mark_backlog, more_waiting_than
from app.delivery.send.scheduling import delivery_key, job_for, kick_pacer
from app.delivery.send.throttle import NORMAL
from app.instagram.webhook_payload import EnvelopeError, ParsedWebhook, decode_body, parse_webhook
from app.instruments import WEBHOOK_EVENTS
from app.operations.idempotency_hits import count_webhook_duplicates
from app.queue import JobName, enqueue_many
from app.resources import Resources

# Events another job holds are skipped, processed ones are never touched again.
_LOCK_EVENTS = (
    "SELECT id, body, received_at FROM webhook_events "
    "WHERE id = ANY(CAST(%(ids)b AS bigint[])) AND status IN ('received', 'enqueued') "
    "ORDER BY id FOR UPDATE SKIP LOCKED"
)
_FINISH_COLUMNS = (
    ("id", "bigint"),
    ("status", "varchar"),
    ("reject_reason", "text"),
    ("item_count", "integer"),
    ("details", "jsonb"),
)
_FINISH_EVENTS = (
    "UPDATE webhook_events AS e SET status = u.status, reject_reason = u.reject_reason, "  # noqa: S608 - constants
    "item_count = u.item_count, details = u.details, processed_at = now() "
    f"FROM {unnest_arrays(_FINISH_COLUMNS)} AS u(id, status, reject_reason, item_count, details) "
    "WHERE e.id = u.id"
)


@dataclass(slots=True)
class EventsIngest:
    """What one ingest run did: the deliveries to enqueue and a summary for the job result."""

    deliveries: list[int] = field(default_factory=list)
    # Comment rows of accounts with a backlog, and those accounts: their pacers send them.
    paced_rows: set[int] = field(default_factory=set)
    paced_accounts: set[int] = field(default_factory=set)
    accounts_of: dict[int, int] = field(default_factory=dict)
    # New rows from taps and DM keyword triggers, with their kind (which job they are owed).
    dm_deliveries: list[tuple[int, TriggerKind]] = field(default_factory=list)
    processed: list[int] = field(default_factory=list)
    rejected: dict[int, str] = field(default_factory=dict)
    unknown_accounts: Counter[str] = field(default_factory=Counter)
    malformed: dict[int, int] = field(default_factory=dict)  # event id → problem count
    counts: Counter[str] = field(default_factory=Counter)

    def summary(self) -> dict[str, Any]:
        summary: dict[str, Any] = {
            "processed": len(self.processed),
            "rejected": len(self.rejected),
            "deliveries": len(self.deliveries),
            **dict(self.counts),
        }
        if self.dm_deliveries:
            summary["dm_deliveries"] = len(self.dm_deliveries)
        return summary


async def pace_surges(resources: Resources, outcome: EventsIngest) -> None:
    """An account with more comments waiting for a private reply than its jobs may send now
    (this run's new ones and those whose jobs are still queued, against the budget's free
    slots, and at most one batch in flight, `budget.HourlyBudget.reservable`), or whose pace Meta
    slowed or paused (`throttle`: no job takes a slot of its own then), is surging: its new
    comments go to its pacer at once, oldest first, rather than each job first trying the
    budget on its own. Counting only this run's comments would let a surge that arrives in
    small runs, while the workers fall behind, queue a job per comment, each of which then
    finds the budget full."""
    new: Counter[int] = Counter(
        outcome.accounts_of[log_id]
        for log_id in outcome.deliveries
        if log_id not in outcome.paced_rows and log_id in outcome.accounts_of
    )
    if not new:
        return
    budget = account_budget(resources)
    for account_id, count in new.items():
        # The budget's free slots and the account's pace, read in one script.
        availability = await budget.free(account_id)
        free = budget.reservable(availability)
        async with autocommit(resources.engine) as conn:
            if (
                free >= count
                and availability.pace_mode == NORMAL
                and not await more_waiting_than(conn, account_id, free)
            ):
                continue
            await mark_backlog(conn, account_id)
        outcome.paced_accounts.add(account_id)
        outcome.paced_rows.update(
            log_id for log_id, account in outcome.accounts_of.items() if account == account_id
        )


async def enqueue_ingested(queue: Queue, outcome: EventsIngest) -> int:
    """Every job an ingest run's commit owes: one per new row, by its kind, except a comment
    of an account with a backlog, which its pacer is told of instead."""
    own = [log_id for log_id in outcome.deliveries if log_id not in outcome.paced_rows]
    added = await enqueue_deliveries(queue, own) if own else 0
    await kick_pacer(queue, outcome.paced_accounts)
    by_job: dict[JobName, list[tuple[str, dict[str, Any]]]] = defaultdict(list)
    for log_id, kind in outcome.dm_deliveries:
        by_job[job_for(kind)].append((delivery_key(log_id, None), {"dm_log_id": log_id}))
    for name, jobs in by_job.items():
        added += await enqueue_many(queue, name, jobs)
    return added


async def ingest_events(db: Db, event_ids: Collection[int]) -> EventsIngest:
    """Process these stored webhook events in the caller's transaction (see module doc).

    `db` is a psycopg connection (`app.db.raw`); the worker runs this in a pipelined
    transaction, so the final status update travels with the COMMIT.
    """
    result = EventsIngest()
    rows = await fetch_tuples(db, _LOCK_EVENTS, {"ids": list(event_ids)})
    parsed: dict[int, ParsedWebhook] = {}
    for event_id, body, received_at in rows:
        try:
            parsed[event_id] = parse_webhook(decode_body(body), received_at=received_at)
        except EnvelopeError as exc:
            result.rejected[event_id] = str(exc)[:500]
    comments = [(c, event_id) for event_id, p in parsed.items() for c in p.comments]
    messaging = [(m, event_id) for event_id, p in parsed.items() for m in p.messaging]
    ig_ids = {c.account_ig_id for c, _ in comments} | {m.account_ig_id for m, _ in messaging}
    accounts = await load_account_rules(db, ig_ids)

    comment_result = await ingest_comment_batch(
        db, comments, via=SeenVia.WEBHOOK, accounts=accounts
    )
    work = triggers.MessagingWork()
    messaging_duplicates: Counter[str] = Counter()
    messaging_counts = await record_messaging(
        db, messaging, accounts, work, duplicates=messaging_duplicates
    )
    result.dm_deliveries = await triggers.write(db, work)
    result.deliveries = comment_result.deliveries
    result.paced_rows = comment_result.paced_rows
    result.paced_accounts = comment_result.paced_accounts
    result.accounts_of = comment_result.accounts_of
    result.unknown_accounts = comment_result.unknown_accounts + messaging_counts.pop(
        None, Counter()
    )

    finished: list[dict[str, Any]] = []
    for event_id, reason in result.rejected.items():
        finished.append(_finish(event_id, WebhookStatus.REJECTED, reason, None, None))
    for event_id, p in parsed.items():
        details = _event_details(
            p, comment_result.per_event.get(event_id), messaging_counts.get(event_id)
        )
        finished.append(_finish(event_id, WebhookStatus.PROCESSED, None, p.item_count, details))
        result.processed.append(event_id)
        if p.problem_count:
            result.malformed[event_id] = p.problem_count
        result.counts["items"] += p.item_count
    if finished:
        await execute(db, _FINISH_EVENTS, columns_of(_FINISH_COLUMNS, finished))
    result.counts.update(comment_result.totals())
    await _count_duplicates(db, comment_result.duplicates, accounts, "webhook.comment")
    await _count_duplicates(db, messaging_duplicates, accounts, "webhook.messaging")
    return result


async def _count_duplicates(
    db: Db, duplicates: Counter[str], accounts: Mapping[str, AccountRules], scope: str
) -> None:
    """Items Meta sent again, absorbed by a ledger's unique key: counted per account."""
    by_account: Counter[tuple[int, int]] = Counter()
    for ig_id, count in duplicates.items():
        account = accounts.get(ig_id)
        if account is not None:
            by_account[(account.workspace_id, account.account_id)] += count
    WEBHOOK_EVENTS.labels("duplicate").inc(sum(duplicates.values()))
    await count_webhook_duplicates(db, by_account, scope)


# --- events -------------------------------------------------------------------------------


def _finish(
    event_id: int,
    status: WebhookStatus,
    reason: str | None,
    items: int | None,
    details: dict[str, Any] | None,
) -> dict[str, Any]:
    return {
        "id": event_id,
        "status": status.value,
        "reject_reason": reason,
        "item_count": items,
        "details": details,
    }


def _event_details(
    parsed: ParsedWebhook,
    comments: Counter[str] | None,
    messaging: Counter[str] | None,
) -> dict[str, Any]:
    details: dict[str, Any] = {}
    if comments:
        details["comments"] = dict(comments)
    if messaging:
        details["messaging"] = dict(messaging)
    if parsed.ignored:
        details["ignored"] = dict(parsed.ignored)
    if parsed.problem_count:
        details["problem_count"] = parsed.problem_count
        details["problems"] = [p.as_json() for p in parsed.problems]
    return details
