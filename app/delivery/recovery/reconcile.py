"""The comment reconciler: poll for the comments webhooks missed, and backfill them safely.

Webhooks are best-effort: Meta drops some, sends none for collapsed or filtered comments and
replays nothing after 36 hours. So every `RECONCILE_INTERVAL_S` each account that is active
and has an active campaign gets one sweep:

1. **Claim.** One UPDATE stamps `last_reconciled_at` only if the account is due, so cron
   ticks on several workers, or a sweep still running, never sweep an account twice at once.
2. **Plan** (`reconcile_plan.plan_targets`): the media the account's campaigns cover (for
   any-post campaigns its 10 most recent), each read back to its floor: 72 hours ago, and
   never before the campaign became active.
3. **Read** comments newest first, 50 a page, only as far back as the floor (at most 16 pages).
   Keep a comment only if it is top-level, not the account's own and not already answered by
   the account (a reply from it in `replies{from}`).
4. **Backfill** what `reconcile_plan.pick_new` keeps (new to the ledger, or recorded as a miss
   only because no campaign watched its post then, `UNWATCHED`; after a next-post binding,
   any miss the campaigns judged, `JUDGED`; one batch lookup; one an active campaign would
   answer; at most 30 per media per sweep) through `ingest_comments(via=POLL, rematch=…)`,
   in one transaction with the account's stamp and, when something was recovered, one
   `reconciler_recovered` event; commit; enqueue the deliveries.

The ledger's unique key is the dedupe: a comment that the webhook brings at the same moment
is processed once, whichever path writes first; and two overlapping sweeps (`force`) add
nothing twice.

Gentle on Meta: rate-limit answers (4, 17, 32, 341, 613, 80002, 80006), a 368 or a transport
failure stop the account's sweep; a 190 goes through the token handling (refresh, else
`needs_reauth`) and stops it; any other error on one media is noted and the sweep goes on.
Problems become at most one `reconciler_read_failed` event per account every 6 hours.

Limits: the Graph API does not return comments hidden by Hidden Words or the spam filter, from
restricted people, on age-gated media or on ads that were never seen by a webhook, so no poll
recovers those; on a post with more than 800 comments inside the window the oldest are not
reached. Only comments a campaign would answer are written; misses stay the webhook path's
record.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from redis.exceptions import RedisError
from sqlalchemy import or_, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from app.accounts.tokens import MissingTokenError, open_access_token
from app.campaigns.matching import CampaignRule
from app.campaigns.rules import load_active_rules
from app.crypto import TokenDecryptError
from app.db.models import (
    AccountStatus,
    CampaignScope,
    Comment,
    DmLog,
    EventLevel,
    InstagramAccount,
    MissReason,
    SeenVia,
)
from app.delivery.intake.comments import JUDGED, UNWATCHED, enqueue_deliveries, ingest_comments
from app.delivery.recovery.reconcile_plan import MediaTarget, pick_new, plan_targets
from app.delivery.send.account_state import handle_token_refused
from app.instagram.classify import RETRYABLE_CODES
from app.instagram.graph import GraphApiError, GraphError, GraphTransportError
from app.instagram.webhook_payload import CommentItem, comment_from_graph
from app.operations.events import record_event, record_event_once
from app.queue import JobName, enqueue_many
from app.resources import Resources

logger = logging.getLogger("oncereply.reconcile")

RECENT_MEDIA = 10
MAX_PAGES = 16  # 800 comments: a viral post is read in part, never all of it
AD_COPY_MEMORY = timedelta(days=30)
# Stop reading past this (checked before every page), so that even with one slow call after it
# the job (timeout 300 s in app.jobs.registry) still records what was read.
SWEEP_BUDGET_S = 180.0
# Answers that mean "slow down" (or 368, "stop"): the account's sweep ends at once.
STOP_CODES = RETRYABLE_CODES | {368}
TOKEN_REFUSED = 190
PROBLEM_EVENT_EVERY = timedelta(hours=6)
DUE_BATCH = 500
# A comment without a readable timestamp cannot be placed in the window: treat it as old.
_UNKNOWN_TIME = datetime(1970, 1, 1, tzinfo=UTC)

# Due: active, with an active campaign, and not swept within the interval (unless forced).
_CLAIM = text(
    """
UPDATE instagram_accounts a SET last_reconciled_at = now()
WHERE a.id = :id AND a.status = 'active'
  AND (CAST(:force AS boolean) OR a.last_reconciled_at IS NULL
       OR a.last_reconciled_at <= now() - make_interval(secs => :interval))
  AND EXISTS (SELECT 1 FROM campaigns c WHERE c.account_id = a.id AND c.status = 'active')
RETURNING a.id
"""
)
_DUE = text(
    """
SELECT a.id FROM instagram_accounts a
WHERE a.status = 'active'
  AND (a.last_reconciled_at IS NULL
       OR a.last_reconciled_at <= now() - make_interval(secs => :interval))
  AND EXISTS (SELECT 1 FROM campaigns c WHERE c.account_id = a.id AND c.status = 'active')
ORDER BY a.last_reconciled_at NULLS FIRST, a.id
LIMIT :limit
"""
)
_STAMP = text("UPDATE instagram_accounts SET last_reconciled_at = now() WHERE id = :id")


@dataclass(slots=True)
class SweepReport:
    """What one sweep of one account did (the job's result, and what tests read)."""

    account_id: int
    skipped: str | None = None  # why nothing was read (not due, no token…)
    media_read: int = 0
    pages: int = 0
    comments_seen: int = 0
    recovered: int = 0  # new deliveries
    deferred: int = 0  # new matches over the per-media cap, left for the next sweep
    recovered_by_media: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    stopped: str | None = None  # why the sweep ended early

    def as_dict(self) -> dict[str, Any]:
        return {
            "account_id": self.account_id,
            "skipped": self.skipped,
            "media_read": self.media_read,
            "pages": self.pages,
            "comments_seen": self.comments_seen,
            "recovered": self.recovered,
            "deferred": self.deferred,
            "errors": self.errors,
            "stopped": self.stopped,
        }


# --- scheduling -----------------------------------------------------------------------------


async def enqueue_due_sweeps(resources: Resources) -> int:
    """The cron tick: one `reconcile_account` job per due account; returns how many were new.

    The job claims the account itself, so a tick that overlaps a running sweep is harmless.
    """
    async with resources.sessionmaker() as session:
        due = (
            await session.scalars(
                _DUE,
                {"interval": resources.settings.reconcile_interval_s, "limit": DUE_BATCH},
            )
        ).all()
    jobs = [(f"reconcile:{account_id}", {"account_id": account_id}) for account_id in due]
    return await enqueue_many(resources.queue, JobName.RECONCILE_ACCOUNT, jobs)


async def reconcile_account(
    resources: Resources, account_id: int, *, force: bool = False
) -> SweepReport:
    """Sweep one account if it is due (always, with `force`: a sweep on request)."""
    report = SweepReport(account_id)
    async with resources.sessionmaker() as session, session.begin():
        claimed = await session.scalar(
            _CLAIM,
            {"id": account_id, "force": force, "interval": resources.settings.reconcile_interval_s},
        )
    if claimed is None:
        report.skipped = "not due, not active, or no active campaign"
        return report
    return await _sweep(resources, report, only_media=None)


async def reconcile_media(
    resources: Resources, account_id: int, media_ids: Collection[str]
) -> SweepReport:
    """Sweep only these media of the account now, by the same rules (after a next-post
    binding: comments made between the post's publication and the binding)."""
    return await _sweep(resources, SweepReport(account_id), only_media=frozenset(media_ids))


# --- the sweep ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Account:
    id: int
    workspace_id: int
    ig_user_id: str
    own_ids: frozenset[str]
    username: str
    token_ciphertext: bytes | None


async def _sweep(
    resources: Resources, report: SweepReport, *, only_media: frozenset[str] | None
) -> SweepReport:
    now = datetime.now(UTC)
    async with resources.sessionmaker() as session:
        row = await session.get(InstagramAccount, report.account_id)
        rules = await load_active_rules(session, report.account_id)
        if row is None or row.status is not AccountStatus.ACTIVE or not rules:
            report.skipped = "not active, or no active campaign"
            return report
        account = _Account(
            id=row.id,
            workspace_id=row.workspace_id,
            ig_user_id=row.ig_user_id,
            own_ids=frozenset(i for i in (row.ig_user_id, row.app_scoped_id) if i),
            username=row.username.casefold(),
            token_ciphertext=row.token_ciphertext,
        )
        try:
            token = open_access_token(resources.cipher, row)
        except (MissingTokenError, TokenDecryptError) as exc:
            token = ""
            report.skipped = f"no usable token: {exc}"
        posts = [r.media_id for r in rules if r.media_id and r.scope is not CampaignScope.ANY_POST]
        ad_copies = await _ad_copies(session, account.id, posts) if posts else {}
    if not token:
        await handle_token_refused(resources, account.id, None)
        return report

    reader = _Reader(resources, account, token, report)
    recent: list[str] = []
    if only_media is None and any(r.scope is CampaignScope.ANY_POST for r in rules):
        recent = await reader.recent_media()
    targets = plan_targets(rules, now=now, recent_media=recent, ad_copies=ad_copies)
    if only_media is not None:
        targets = [
            t for t in targets if t.media_id in only_media or t.original_media_id in only_media
        ]
    found: dict[str, list[CommentItem]] = {}
    for target in targets:
        if report.stopped:
            break
        found[target.media_id] = await reader.comments(target)
    await _backfill(
        resources,
        account,
        rules,
        found,
        report,
        stamp=only_media is None,
        rematch=UNWATCHED if only_media is None else JUDGED,
    )
    return report


async def _backfill(
    resources: Resources,
    account: _Account,
    rules: Sequence[CampaignRule],
    found: Mapping[str, Sequence[CommentItem]],
    report: SweepReport,
    *,
    stamp: bool,
    rematch: frozenset[MissReason],
) -> None:
    """Write what is new (and the account's record of the sweep) in one transaction; misses
    for a reason in `rematch` count as new."""
    deliveries: list[int] = []
    async with resources.sessionmaker() as session, session.begin():
        candidates = [c.comment_id for comments in found.values() for c in comments]
        known = await _in_ledger(session, account.id, candidates, rematch) if candidates else set()
        chosen, report.deferred = pick_new(found, known, rules)
        if chosen:
            result = await ingest_comments(session, chosen, via=SeenVia.POLL, rematch=rematch)
            deliveries = result.deliveries
        report.recovered = len(deliveries)
        if deliveries:
            for media_id in await _delivered_media(session, deliveries):
                key = media_id or "unknown"
                report.recovered_by_media[key] = report.recovered_by_media.get(key, 0) + 1
            await _record_recovered(session, account, report)
        if report.errors or report.stopped:
            await _record_problems(session, account, report)
        if stamp:
            await session.execute(_STAMP, {"id": account.id})
    if deliveries:
        try:
            await enqueue_deliveries(resources.queue, deliveries)
        except (RedisError, OSError):
            # The rows are PENDING in Postgres: the due-work relay enqueues them shortly.
            logger.warning("could not enqueue %d recovered deliveries", len(deliveries))
    if report.recovered or report.errors or report.stopped:
        logger.info("reconciler sweep: %s", report.as_dict())


class _Reader:
    """The Graph reads of one sweep; turns failures into notes or a stop."""

    def __init__(
        self, resources: Resources, account: _Account, token: str, report: SweepReport
    ) -> None:
        self._resources = resources
        self._account = account
        self._token = token
        self._report = report
        self._started = time.monotonic()

    def out_of_time(self) -> bool:
        return time.monotonic() - self._started > SWEEP_BUDGET_S

    async def recent_media(self) -> list[str]:
        try:
            page = await self._resources.graph.list_media(
                self._token, self._account.ig_user_id, limit=RECENT_MEDIA
            )
        except GraphError as exc:
            await self._failed(exc, "the recent media")
            return []
        return [str(item["id"]) for item in page.items if item.get("id")]

    async def comments(self, target: MediaTarget) -> list[CommentItem]:
        """The media's comments since its floor that could be work, newest first."""
        self._report.media_read += 1
        kept: list[CommentItem] = []
        after: str | None = None
        for _ in range(MAX_PAGES):
            if self.out_of_time():
                self._report.stopped = f"time budget of {SWEEP_BUDGET_S:g} s used up"
                break
            try:
                page = await self._resources.graph.list_comments(
                    self._token, target.media_id, after=after
                )
            except GraphError as exc:
                await self._failed(exc, f"the comments of media {target.media_id}")
                break
            self._report.pages += 1
            reached_floor = False
            for data in page.items:
                self._report.comments_seen += 1
                comment = self._comment(target, data)
                if comment is None:
                    continue
                if comment.commented_at < target.since:
                    reached_floor = True  # newest first: everything after this is older
                    continue
                if comment.parent_id or self._by_account(data) or self._answered(data):
                    continue
                kept.append(comment)
            if reached_floor or page.after is None:
                break
            after = page.after
        return kept

    def _comment(self, target: MediaTarget, data: Mapping[str, Any]) -> CommentItem | None:
        try:
            return comment_from_graph(
                self._account.ig_user_id,
                target.media_id,
                data,
                original_media_id=target.original_media_id,
                fallback_time=_UNKNOWN_TIME,
            )
        except ValueError as exc:
            self._report.errors.append(f"unusable comment on {target.media_id}: {exc}")
            return None

    def _by_account(self, data: Mapping[str, Any]) -> bool:
        # Meta shows the account's own comments with its app-scoped id or its professional
        # id depending on the path; the username settles it either way.
        author = data.get("from")
        author = author if isinstance(author, Mapping) else {}
        author_id = str(author.get("id") or "")
        username = str(author.get("username") or data.get("username") or "").casefold()
        return author_id in self._account.own_ids or username == self._account.username

    def _answered(self, data: Mapping[str, Any]) -> bool:
        replies = data.get("replies")
        items = replies.get("data") if isinstance(replies, Mapping) else None
        if not isinstance(items, list):
            return False
        return any(isinstance(reply, Mapping) and self._by_account(reply) for reply in items)

    async def _failed(self, exc: GraphError, what: str) -> None:
        report = self._report
        if isinstance(exc, GraphApiError) and exc.code == TOKEN_REFUSED:
            outcome = await handle_token_refused(
                self._resources, self._account.id, self._account.token_ciphertext
            )
            report.stopped = f"Instagram refused the access token reading {what} ({outcome})"
        elif isinstance(exc, GraphApiError) and exc.code in STOP_CODES:
            report.stopped = f"Instagram asked to slow down reading {what} (code {exc.code})"
        elif isinstance(exc, GraphTransportError):
            report.stopped = f"Instagram could not be reached reading {what} ({exc.kind})"
        else:
            report.errors.append(f"could not read {what}: {exc}"[:500])


# --- queries and records ----------------------------------------------------------------------


async def _ad_copies(
    session: AsyncSession, account_id: int, posts: Sequence[str]
) -> dict[str, str]:
    """Ad copies of these posts that comments in the ledger came from, recently."""
    rows = await session.execute(
        select(Comment.media_id, Comment.original_media_id)
        .distinct()
        .where(
            Comment.account_id == account_id,
            Comment.created_at > datetime.now(UTC) - AD_COPY_MEMORY,
            Comment.original_media_id.in_(list(posts)),
            Comment.media_id.is_not(None),
            Comment.media_id != Comment.original_media_id,
        )
    )
    return {media: original for media, original in rows.tuples() if media and original}


async def _in_ledger(
    session: AsyncSession,
    account_id: int,
    comment_ids: Sequence[str],
    rematch: frozenset[MissReason],
) -> set[str]:
    """The comments the ledger has settled: all but the misses for a reason in `rematch`."""
    rows = await session.scalars(
        select(Comment.comment_id).where(
            Comment.account_id == account_id,
            Comment.comment_id.in_(list(set(comment_ids))),
            or_(Comment.miss_reason.is_(None), Comment.miss_reason.not_in(rematch)),
        )
    )
    return set(rows)


async def _delivered_media(session: AsyncSession, dm_log_ids: Sequence[int]) -> list[str | None]:
    return list(await session.scalars(select(DmLog.media_id).where(DmLog.id.in_(dm_log_ids))))


async def _record_recovered(session: AsyncSession, account: _Account, report: SweepReport) -> None:
    count = report.recovered
    noun = "comment" if count == 1 else "comments"
    message = f"Recovered {count} {noun} the webhook missed"
    if report.deferred:
        message += f"; {report.deferred} more will follow in the next sweeps"
    await record_event(
        session,
        source="worker",
        level=EventLevel.INFO,
        kind="reconciler_recovered",
        message=message,
        workspace_id=account.workspace_id,
        account_id=account.id,
        details={
            "recovered": count,
            "deferred": report.deferred,
            "by_media": report.recovered_by_media,
        },
    )


async def _record_problems(session: AsyncSession, account: _Account, report: SweepReport) -> None:
    problems = ([report.stopped] if report.stopped else []) + report.errors
    await record_event_once(
        session,
        dedupe_key=f"account:{account.id}",
        within=PROBLEM_EVENT_EVERY,
        source="worker",
        level=EventLevel.WARNING,
        kind="reconciler_read_failed",
        message="Checking for missed comments ran into problems: " + "; ".join(problems[:3]),
        workspace_id=account.workspace_id,
        account_id=account.id,
        details={"stopped": report.stopped, "errors": report.errors[:20]},
    )
