"""Ingest: stored webhook events (and polled comments) → ledger rows → PENDING deliveries.

Durable first (DESIGN §4.1). One transaction per batch of events:

1. lock the events still `received`/`enqueued` (`FOR UPDATE SKIP LOCKED`: a concurrent
   job for the same events skips them; a processed event is never touched again);
2. parse every body into comments, messaging items and problems (`webhook_payload`);
3. load the accounts involved and their active campaigns in one query, and decide each
   comment's campaign (`app.campaigns.matching`) before writing anything;
4. insert the ledger rows (`comments`, `ON CONFLICT (account_id, comment_id) DO NOTHING
   RETURNING`), then a PENDING `dm_logs` row for each *new* matched comment (`ON CONFLICT
   (account_id, trigger_id) DO NOTHING RETURNING id`), and the messaging ledger rows — each
   kind in one multi-row statement, whatever the batch size;
5. turn button taps and DM keyword triggers into work (`triggers`): a tap's
   `postback_deliveries` claim and its `dm_logs` row, a DM's `dm_logs` row — also one
   statement per kind;
6. mark each event `processed` (item count, what became of its items) or `rejected` (why).

After the commit, each new `dm_logs` row gets one delivery job keyed `deliver:<id>`
(`process_comment`, `process_postback`, `process_message`). Enqueueing can fail (Redis down):
the rows are already PENDING and the due-work relay finds them. Re-running an event changes
nothing: the unique keys are the dedupe.

`ingest_comments` is the same step 3–4 for comments from anywhere: the reconciler calls it
with polled comments (`via=SeenVia.POLL`), then commits and calls `enqueue_deliveries`.
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from saq import Queue
from sqlalchemy.ext.asyncio import AsyncSession

from app.campaigns.matching import (
    CampaignRule,
    CommentFacts,
    MatchDecision,
    choose_campaign,
    miss,
)
from app.campaigns.rules import AccountRules, load_account_rules
from app.db.models import (
    AccountStatus,
    CommentOutcome,
    LegState,
    MessagingMissReason,
    MissReason,
    SeenVia,
    TriggerKind,
    WebhookStatus,
)
from app.db.raw import Db, db_of, execute, fetch_tuples
from app.delivery.intake import triggers
from app.delivery.intake.bulk import INSERT_DM_LOGS, BulkInsert, columns_of, unnest_arrays
from app.delivery.send.scheduling import delivery_key, job_for
from app.instagram.webhook_payload import (
    CommentItem,
    EnvelopeError,
    MessagingItem,
    MessagingKind,
    ParsedWebhook,
    decode_body,
    parse_webhook,
)
from app.queue import JobName, enqueue_many

logger = logging.getLogger("oncereply.ingest")

# Meta accepts a private reply for 7 days after the comment.
PRIVATE_REPLY_WINDOW = timedelta(days=7)
_INSERT_COMMENTS = BulkInsert(
    "comments",
    (
        ("account_id", "bigint"),
        ("comment_id", "varchar"),
        ("media_id", "varchar"),
        ("original_media_id", "varchar"),
        ("parent_id", "varchar"),
        ("text", "text"),
        ("commenter_id", "varchar"),
        ("commenter_username", "varchar"),
        ("commented_at", "timestamptz"),
        ("first_seen_via", "varchar"),
        ("webhook_event_id", "bigint"),
        ("outcome", "varchar"),
        ("miss_reason", "varchar"),
        ("campaign_id", "bigint"),
        ("matched_keyword", "varchar"),
        ("decision", "jsonb"),
    ),
    conflict="account_id, comment_id",
    returning="id, account_id, comment_id",
)
_INSERT_MESSAGING = BulkInsert(
    "messaging_events",
    (
        ("account_id", "bigint"),
        ("webhook_event_id", "bigint"),
        ("kind", "varchar"),
        ("dedupe_key", "varchar"),
        ("user_id", "varchar"),
        ("mid", "varchar"),
        ("text", "text"),
        ("payload", "text"),
        ("occurred_at", "timestamptz"),
        ("opens_window", "boolean"),
        ("miss_reason", "varchar"),
        ("details", "jsonb"),
    ),
    conflict="account_id, dedupe_key",
    returning="account_id, dedupe_key",
)
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
# Kinds of inbound messaging that (re)open a person's 24-hour window.
_WINDOW_KINDS = frozenset(
    {MessagingKind.MESSAGE, MessagingKind.POSTBACK, MessagingKind.REACTION, MessagingKind.REFERRAL}
)


@dataclass(slots=True)
class CommentIngest:
    """What became of a batch of comments."""

    # New `dm_logs` rows, each owed one `process_comment` job once the transaction commits.
    deliveries: list[int] = field(default_factory=list)
    # Per source event (None for comments not from a webhook): new, duplicate, matched,
    # miss:<reason>, unknown_account.
    per_event: dict[int | None, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    unknown_accounts: Counter[str] = field(default_factory=Counter)

    def totals(self) -> Counter[str]:
        total: Counter[str] = Counter()
        for counts in self.per_event.values():
            total.update(counts)
        return total


@dataclass(slots=True)
class EventsIngest:
    """What one ingest run did: the deliveries to enqueue and a summary for the job result."""

    deliveries: list[int] = field(default_factory=list)
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


async def ingest_comments(
    session: AsyncSession,
    comments: Sequence[CommentItem],
    *,
    via: SeenVia,
    webhook_event_id: int | None = None,
) -> CommentIngest:
    """Ledger rows (and PENDING deliveries for new matches) for these comments.

    Runs in the caller's transaction: commit, then `enqueue_deliveries(queue,
    result.deliveries)`. A comment already in the ledger adds nothing, whichever path saw it
    first.
    """
    return await _ingest_comment_batch(
        await db_of(session), [(comment, webhook_event_id) for comment in comments], via=via
    )


async def enqueue_deliveries(queue: Queue, dm_log_ids: Sequence[int]) -> int:
    """One `process_comment` job per new log row, keyed `deliver:<id>`; returns how many."""
    jobs = [(delivery_key(log_id, None), {"dm_log_id": log_id}) for log_id in dm_log_ids]
    return await enqueue_many(queue, JobName.PROCESS_COMMENT, jobs)


async def enqueue_ingested(queue: Queue, outcome: EventsIngest) -> int:
    """Every job an ingest run's commit owes: one per new row, by its kind."""
    added = await enqueue_deliveries(queue, outcome.deliveries) if outcome.deliveries else 0
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

    comment_result = await _ingest_comment_batch(
        db, comments, via=SeenVia.WEBHOOK, accounts=accounts
    )
    work = triggers.MessagingWork()
    messaging_counts = await _record_messaging(db, messaging, accounts, work)
    result.dm_deliveries = await triggers.write(db, work)
    result.deliveries = comment_result.deliveries
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
    return result


# --- comments -----------------------------------------------------------------------------


async def _ingest_comment_batch(
    db: Db,
    items: Iterable[tuple[CommentItem, int | None]],
    *,
    via: SeenVia,
    accounts: dict[str, AccountRules] | None = None,
) -> CommentIngest:
    result = CommentIngest()
    unique: dict[tuple[str, str], tuple[CommentItem, int | None]] = {}
    for comment, event_id in items:
        if (
            unique.setdefault((comment.account_ig_id, comment.comment_id), (comment, event_id))[0]
            is not comment
        ):
            result.per_event[event_id]["duplicate"] += 1
    if not unique:
        return result
    if accounts is None:
        accounts = await load_account_rules(db, {ig for ig, _ in unique})

    pending: dict[tuple[int, str], tuple[CommentItem, int | None, MatchDecision]] = {}
    rows: list[dict[str, Any]] = []
    for (ig_id, comment_id), (comment, event_id) in unique.items():
        account = accounts.get(ig_id)
        if account is None:
            # No account row, no ledger row: the count lands on the event instead.
            result.unknown_accounts[ig_id] += 1
            result.per_event[event_id]["unknown_account"] += 1
            continue
        decision = _decide(account, comment)
        pending[(account.account_id, comment_id)] = (comment, event_id, decision)
        rows.append(_comment_row(account, comment, decision, via, event_id))
    if not rows:
        return result

    # Sorted by the unique key: concurrent batches then take row locks in one order, so two
    # jobs holding overlapping comments wait for each other instead of deadlocking.
    rows.sort(key=lambda row: (row["account_id"], row["comment_id"]))
    inserted = await _INSERT_COMMENTS.execute(db, rows)
    log_rows: list[dict[str, Any]] = []
    for row_id, account_id, comment_id in inserted:
        comment, event_id, decision = pending.pop((account_id, comment_id))
        counts = result.per_event[event_id]
        counts["new"] += 1
        campaign = decision.campaign
        if campaign is None:
            counts[f"miss:{decision.miss_reason}"] += 1
            continue
        counts["matched"] += 1
        log_rows.append(_log_row(account_id, row_id, comment, decision, campaign))
    for _, event_id, _ in pending.values():
        result.per_event[event_id]["duplicate"] += 1
    if log_rows:
        log_rows.sort(key=lambda row: (row["account_id"], row["trigger_id"]))
        result.deliveries = [row[0] for row in await INSERT_DM_LOGS.execute(db, log_rows)]
    return result


def comment_facts(comment: CommentItem) -> CommentFacts:
    """What matching needs of a comment, however it arrived (webhook or poll)."""
    return CommentFacts(
        text=comment.text,
        media_id=comment.media_id,
        original_media_id=comment.original_media_id,
        commenter_id=comment.commenter_id,
        parent_id=comment.parent_id,
        is_own=comment.is_own,
        commented_at=comment.commented_at,
    )


def _decide(account: AccountRules, comment: CommentItem) -> MatchDecision:
    # A paused or re-auth account still gets its work: it waits, it is not dropped.
    if account.status is AccountStatus.DISCONNECTED:
        return miss(MissReason.ACCOUNT_INACTIVE)
    return choose_campaign(account.rules, comment_facts(comment))


def _comment_row(
    account: AccountRules,
    comment: CommentItem,
    decision: MatchDecision,
    via: SeenVia,
    event_id: int | None,
) -> dict[str, Any]:
    return {
        "account_id": account.account_id,
        "comment_id": comment.comment_id,
        "media_id": comment.media_id,
        "original_media_id": comment.original_media_id,
        "parent_id": comment.parent_id,
        "text": comment.text,
        "commenter_id": comment.commenter_id,
        "commenter_username": comment.commenter_username,
        "commented_at": comment.commented_at,
        "first_seen_via": via.value,
        "webhook_event_id": event_id,
        "outcome": (CommentOutcome.MATCHED if decision.matched else CommentOutcome.MISSED).value,
        "miss_reason": decision.miss_reason.value if decision.miss_reason else None,
        "campaign_id": decision.campaign_id,
        "matched_keyword": decision.matched_keyword,
        "decision": decision.to_json(),
    }


def _log_row(
    account_id: int,
    comment_row_id: int,
    comment: CommentItem,
    decision: MatchDecision,
    campaign: CampaignRule,
) -> dict[str, Any]:
    return {
        "workspace_id": campaign.workspace_id,
        "account_id": account_id,
        "campaign_id": campaign.id,
        "campaign_version": campaign.version,
        "trigger_kind": TriggerKind.COMMENT.value,
        "trigger_id": comment.comment_id,
        "comment_row_id": comment_row_id,
        "media_id": comment.media_id,
        "recipient_id": comment.commenter_id,
        "recipient_username": comment.commenter_username,
        "trigger_text": comment.text,
        "matched_keyword": decision.matched_keyword,
        "deadline_at": comment.commented_at + PRIVATE_REPLY_WINDOW,
        "pr_state": LegState.PENDING.value,
        "pub_state": LegState.PENDING.value if campaign.public_reply else None,
    }


# --- messaging ----------------------------------------------------------------------------


async def _record_messaging(
    db: Db,
    items: Sequence[tuple[MessagingItem, int]],
    accounts: dict[str, AccountRules],
    work: triggers.MessagingWork,
) -> dict[int | None, Counter[str]]:
    """Messaging ledger rows, and the taps and DM triggers among them added to `work`; counts
    per event (unknown account ids under the key None)."""
    counts: dict[int | None, Counter[str]] = defaultdict(Counter)
    rows: dict[tuple[int, str], dict[str, Any]] = {}
    outcomes: list[tuple[tuple[int, str], int, str]] = []
    campaigns = await triggers.load_tap_campaigns(db, [item for item, _ in items])
    for item, event_id in items:
        account = accounts.get(item.account_ig_id)
        if account is None:
            counts[None][item.account_ig_id] += 1
            counts[event_id]["unknown_account"] += 1
            continue
        key = (account.account_id, _dedupe_key(item))
        if key in rows:
            counts[event_id]["duplicate"] += 1
            continue
        reason = _messaging_miss(item)
        details = dict(item.extra)
        if reason is None:
            reason, noted = triggers.classify(item, account, campaigns, work)
            details |= noted
        outcomes.append((key, event_id, f"{item.kind}:{reason or 'work'}"))
        rows[key] = {
            "account_id": account.account_id,
            "webhook_event_id": event_id,
            "kind": item.kind.value,
            "dedupe_key": key[1],
            "user_id": item.user_id,
            "mid": item.mid,
            "text": item.text,
            "payload": item.payload,
            "occurred_at": item.occurred_at,
            "opens_window": _opens_window(item),
            "miss_reason": reason.value if reason else None,
            "details": details or None,
        }
    if not rows:
        return counts
    # Sorted by the unique key: concurrent batches then take row locks in one order.
    ordered = [rows[key] for key in sorted(rows)]
    new = set(await _INSERT_MESSAGING.execute(db, ordered))
    for key, event_id, outcome in outcomes:
        counts[event_id][outcome if key in new else "duplicate"] += 1
    return counts


def _messaging_miss(item: MessagingItem) -> MessagingMissReason | None:
    if item.kind is MessagingKind.ECHO:
        return MessagingMissReason.ECHO
    if item.is_self:
        return MessagingMissReason.SELF
    if item.kind is MessagingKind.MESSAGE:
        if item.is_deleted:
            return MessagingMissReason.DELETED
        if item.is_unsupported:
            return MessagingMissReason.UNSUPPORTED
        return None if item.text else MessagingMissReason.NO_TEXT
    if item.kind is MessagingKind.POSTBACK:
        return None
    return MessagingMissReason.NOT_A_TRIGGER


def _opens_window(item: MessagingItem) -> bool:
    if item.kind is MessagingKind.ECHO or item.is_self or item.is_deleted:
        return False
    return item.kind in _WINDOW_KINDS


def _dedupe_key(item: MessagingItem) -> str:
    millis = int(item.occurred_at.timestamp() * 1000)
    person = item.user_id or "-"
    kind = item.kind
    if kind is MessagingKind.MESSAGE:
        key = f"message:{item.mid}" if item.mid else f"message:{person}:{millis}"
    elif kind is MessagingKind.ECHO:
        key = f"echo:{item.mid}" if item.mid else f"echo:{person}:{millis}"
    elif kind is MessagingKind.POSTBACK:
        key = f"postback:{person}:{item.mid or f'{item.payload}:{millis}'}"
    elif kind is MessagingKind.REACTION:
        key = f"reaction:{person}:{item.mid}:{item.extra.get('action')}:{item.payload}"
    elif kind is MessagingKind.READ:
        key = f"read:{person}:{item.mid or millis}"
    elif kind is MessagingKind.EDIT:
        key = f"edit:{item.mid}:{item.extra.get('num_edit', millis)}"
    else:
        key = f"{kind}:{person}:{millis}"
    return key[:400]


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
