"""Comments into the ledger: a `comments` row each, and a PENDING delivery for each new match.

For a batch of comments, from webhooks (`ingest.ingest_events`) or from a poll (the
reconciler, `via=SeenVia.POLL`): load the accounts involved and their active campaigns in one
query and decide each comment's campaign (`app.campaigns.matching`) before writing anything;
then insert the ledger rows (`ON CONFLICT (account_id, comment_id) DO NOTHING RETURNING`) and
a PENDING `dm_logs` row for each *new* matched comment (`ON CONFLICT (account_id,
trigger_id) DO NOTHING RETURNING id`), each in one multi-row statement whatever the batch
size. A comment already in the ledger adds nothing, whichever path saw it first: the unique
keys are the dedupe.

One exception, for the safety nets (`rematch`, a set of miss reasons): a comment the ledger
holds as a miss for one of those reasons and that a campaign answers now (the first minutes
of a post a next-post campaign binds to later) is matched by one conditional UPDATE (`WHERE
outcome = 'missed'`) and gets its PENDING delivery; the UPDATE's condition and the `dm_logs`
unique key keep that to once, however many sweeps race.

Everything runs in the caller's transaction; after its commit each new row is owed one
`process_comment` job (`enqueue_deliveries`, keyed `deliver:<id>`).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
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
    MissReason,
    SeenVia,
    TriggerKind,
)
from app.db.raw import Db, db_of, fetch_tuples
from app.delivery.intake.bulk import INSERT_DM_LOGS, BulkInsert, columns_of, unnest_arrays
from app.delivery.send.scheduling import delivery_key
from app.instagram.webhook_payload import CommentItem
from app.queue import JobName, enqueue_many

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
# Misses that say only "no campaign watched this post then": a campaign that covers it later
# may answer them.
UNWATCHED = frozenset({MissReason.NO_CAMPAIGN_FOR_POST, MissReason.NO_ACTIVE_CAMPAIGN})
# On a post a next-post campaign just took, every miss the campaigns then judged (any-post
# ones, say, whose keywords it lacked) is judged again; a miss about the comment itself (own,
# a reply, empty) or its account never is.
JUDGED = UNWATCHED | {
    MissReason.NO_KEYWORD,
    MissReason.EXCLUDED_KEYWORD,
    MissReason.BEFORE_ACTIVATION,
}
_REMATCH_COLUMNS = (
    ("account_id", "bigint"),
    ("comment_id", "varchar"),
    ("campaign_id", "bigint"),
    ("matched_keyword", "varchar"),
    ("decision", "jsonb"),
)
_REMATCH = (
    "UPDATE comments c SET outcome = 'matched', miss_reason = NULL, "  # noqa: S608 - constants
    "campaign_id = v.campaign_id, matched_keyword = v.matched_keyword, decision = v.decision "
    f"FROM {unnest_arrays(_REMATCH_COLUMNS)} "
    "AS v(account_id, comment_id, campaign_id, matched_keyword, decision) "
    "WHERE c.account_id = v.account_id AND c.comment_id = v.comment_id "
    "AND c.outcome = 'missed' AND c.miss_reason = ANY(%(reasons)s) "
    "RETURNING c.id, c.account_id, c.comment_id"
)


@dataclass(slots=True)
class CommentIngest:
    """What became of a batch of comments."""

    # New `dm_logs` rows, each owed one `process_comment` job once the transaction commits.
    deliveries: list[int] = field(default_factory=list)
    # Those of them whose account has a backlog: its pacer sends them (no job of their own).
    paced_rows: set[int] = field(default_factory=set)
    paced_accounts: set[int] = field(default_factory=set)
    # The account of each new row.
    accounts_of: dict[int, int] = field(default_factory=dict)
    # Per source event (None for comments not from a webhook): new, duplicate, matched,
    # miss:<reason>, unknown_account.
    per_event: dict[int | None, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    unknown_accounts: Counter[str] = field(default_factory=Counter)
    # Comments already in the ledger (or twice in the batch), per account's Instagram id.
    duplicates: Counter[str] = field(default_factory=Counter)

    def totals(self) -> Counter[str]:
        total: Counter[str] = Counter()
        for counts in self.per_event.values():
            total.update(counts)
        return total


async def ingest_comments(
    session: AsyncSession,
    comments: Sequence[CommentItem],
    *,
    via: SeenVia,
    webhook_event_id: int | None = None,
    rematch: frozenset[MissReason] = frozenset(),
) -> CommentIngest:
    """Ledger rows (and PENDING deliveries for new matches) for these comments.

    Runs in the caller's transaction: commit, then `enqueue_deliveries(queue,
    result.deliveries)`. A comment already in the ledger adds nothing, whichever path saw it
    first, unless it is a miss for a reason in `rematch` and matches now.
    """
    return await ingest_comment_batch(
        await db_of(session),
        [(comment, webhook_event_id) for comment in comments],
        via=via,
        rematch=rematch,
    )


async def enqueue_deliveries(queue: Queue, dm_log_ids: Sequence[int]) -> int:
    """One `process_comment` job per new log row, keyed `deliver:<id>`; returns how many."""
    jobs = [(delivery_key(log_id, None), {"dm_log_id": log_id}) for log_id in dm_log_ids]
    return await enqueue_many(queue, JobName.PROCESS_COMMENT, jobs)


async def ingest_comment_batch(
    db: Db,
    items: Iterable[tuple[CommentItem, int | None]],
    *,
    via: SeenVia,
    accounts: dict[str, AccountRules] | None = None,
    rematch: frozenset[MissReason] = frozenset(),
) -> CommentIngest:
    """`ingest_comments` on a psycopg connection, for comments each tagged with the webhook
    event it came in (None: polled), with the `accounts` the caller already loaded if any."""
    result = CommentIngest()
    unique: dict[tuple[str, str], tuple[CommentItem, int | None]] = {}
    for comment, event_id in items:
        if (
            unique.setdefault((comment.account_ig_id, comment.comment_id), (comment, event_id))[0]
            is not comment
        ):
            result.per_event[event_id]["duplicate"] += 1
            result.duplicates[comment.account_ig_id] += 1
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
    if rematch:
        log_rows.extend(await _rematch(db, pending, rematch, result))
    for comment, event_id, _ in pending.values():
        result.per_event[event_id]["duplicate"] += 1
        result.duplicates[comment.account_ig_id] += 1
    if log_rows:
        log_rows.sort(key=lambda row: (row["account_id"], row["trigger_id"]))
        paced = {rules.account_id for rules in accounts.values() if rules.paced}
        for log_id, account_id in await INSERT_DM_LOGS.execute(db, log_rows):
            result.deliveries.append(log_id)
            result.accounts_of[log_id] = account_id
            if account_id in paced:
                result.paced_rows.add(log_id)
                result.paced_accounts.add(account_id)
    return result


async def _rematch(
    db: Db,
    pending: dict[tuple[int, str], tuple[CommentItem, int | None, MatchDecision]],
    reasons: frozenset[MissReason],
    result: CommentIngest,
) -> list[dict[str, Any]]:
    """Match the misses for `reasons` among `pending` (comments already in the ledger) that a
    campaign answers now; returns their delivery rows and takes them out of `pending`."""
    rows = [
        {
            "account_id": account_id,
            "comment_id": comment_id,
            "campaign_id": decision.campaign_id,
            "matched_keyword": decision.matched_keyword,
            "decision": decision.to_json(),
        }
        for (account_id, comment_id), (_, _, decision) in sorted(pending.items())
        if decision.campaign is not None
    ]
    if not rows:
        return []
    params: dict[str, Any] = columns_of(_REMATCH_COLUMNS, rows)
    params["reasons"] = sorted(reason.value for reason in reasons)
    log_rows: list[dict[str, Any]] = []
    for row_id, account_id, comment_id in await fetch_tuples(db, _REMATCH, params):
        comment, event_id, decision = pending.pop((account_id, comment_id))
        if decision.campaign is not None:  # always: only matched decisions were sent
            result.per_event[event_id]["rematched"] += 1
            log_rows.append(_log_row(account_id, row_id, comment, decision, decision.campaign))
    return log_rows


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
