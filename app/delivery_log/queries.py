"""Reading `dm_logs` for the delivery log: keyset pages, the live poll, and one row's timeline.

Every query starts from `workspace_id = :ws` and orders by `(created_at, id)` so it can walk
an index newest first and stop after a page (see `ix_dm_logs_*` in `app/db/models/delivery.py`;
`bench/log_queries.py` checks the plans on a million rows). No query counts the whole log.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Boolean, ColumnElement, Select, literal_column, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.campaigns.matching import read_from
from app.db.bounds import BIGINT_MAX, parse_id, parse_int
from app.db.models import (
    Campaign,
    Comment,
    DeliveryAttempt,
    DmLog,
    InstagramAccount,
    LegState,
    MessageKind,
    TriggerKind,
)
from app.delivery_log import paging
from app.delivery_log.filters import CommonFilter, Key, LiveWindow, LogFilter, to_micros
from app.delivery_log.paging import keyset_page
from app.delivery_log.words import SKIP_REASONS

PAGE_SIZE = 50
# At most this many new rows join the first page per poll; the rest come with the next ones.
NEW_ROWS_PER_POLL = 100
# A poll re-checks at most this many rows it shows (the unsettled ones).
MAX_LIVE_ROWS = 300
_SETTLED_PR = frozenset(state for state in LegState if state is LegState.SENT or state.is_skip)
_MOVING = frozenset({LegState.PENDING, LegState.IN_FLIGHT})


def like_pattern(needle: str) -> str:
    """`%needle%` with LIKE's wildcards in `needle` taken literally (escape character `\\`)."""
    escaped = needle.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def common_conditions(
    f: CommonFilter, *, created_at: Any, username: Any, text: Any
) -> list[ColumnElement[bool]]:
    """The date range (UTC days) and the search, over either table's columns: username
    and/or text contains the search (trigram indexes serve both)."""
    where: list[ColumnElement[bool]] = []
    if f.since is not None:
        where.append(created_at >= f.since)
    if f.until is not None:
        where.append(created_at < f.until)
    if f.needle:
        pattern = like_pattern(f.needle)
        by_name = username.ilike(pattern, escape="\\")
        where.append(by_name if f.username_only else or_(by_name, text.ilike(pattern, escape="\\")))
    return where


@dataclass(frozen=True, slots=True)
class LogRow:
    id: int
    created_at: datetime
    updated_at: datetime
    account_id: int
    campaign_id: int | None
    trigger_kind: TriggerKind
    recipient_username: str | None
    trigger_text: str | None
    pr_state: LegState
    pr_attempts: int
    pr_attempt_limit: int
    pr_error_code: int | None
    pr_error_message: str | None
    pub_state: LegState | None
    pub_attempts: int
    deadline_at: datetime | None
    message_kind: MessageKind | None = None  # what the DM says: the link, a prompt, a note
    trigger_payload: str | None = None

    @property
    def key(self) -> Key:
        return Key.of(self.created_at, self.id)

    @property
    def version(self) -> int:
        return to_micros(self.updated_at)

    @property
    def settled(self) -> bool:
        """Nothing will change this row by itself or by a button any more."""
        return self.pr_state in _SETTLED_PR and self.pub_state not in _MOVING

    @property
    def window_open(self) -> bool:
        return self.deadline_at is None or self.deadline_at > datetime.now(UTC)

    @property
    def retryable(self) -> bool:
        """A one-click retry: a FAILED DM whose window is still open (7 days for a comment's
        private reply, 24 hours for a tap's, a DM trigger's or a follow-up's DM)."""
        return self.pr_state is LegState.FAILED and self.window_open

    @property
    def reviewable(self) -> bool:
        """An UNCONFIRMED DM: retried only after the creator looked (timeline)."""
        return self.pr_state is LegState.UNCONFIRMED and self.window_open


_COLUMNS = (
    DmLog.id,
    DmLog.created_at,
    DmLog.updated_at,
    DmLog.account_id,
    DmLog.campaign_id,
    DmLog.trigger_kind,
    DmLog.recipient_username,
    DmLog.trigger_text,
    DmLog.pr_state,
    DmLog.pr_attempts,
    DmLog.pr_attempt_limit,
    DmLog.pr_error_code,
    DmLog.pr_error_message,
    DmLog.pub_state,
    DmLog.pub_attempts,
    DmLog.deadline_at,
    DmLog.message_kind,
    DmLog.trigger_payload,
)
NEWEST_FIRST = (DmLog.created_at.desc(), DmLog.id.desc())
_OLDEST_FIRST = (DmLog.created_at.asc(), DmLog.id.asc())


def older_than(key: Key) -> ColumnElement[bool]:
    """Rows after `key` in the log's newest-first order."""
    return paging.older_than(DmLog.created_at, DmLog.id, key)


_NOT_A_COMMENT = literal_column("dm_logs.trigger_kind <> 'comment'", Boolean)


def log_conditions(workspace_id: int, f: LogFilter) -> list[ColumnElement[bool]]:
    where: list[ColumnElement[bool]] = [DmLog.workspace_id == workspace_id]
    states = f.states
    if len(states) == 1:
        where.append(DmLog.pr_state == states[0])
    elif states:
        where.append(DmLog.pr_state.in_(states))
    if f.campaign_id is not None:
        where.append(DmLog.campaign_id == f.campaign_id)
    if f.trigger is not None:
        where.append(DmLog.trigger_kind == f.trigger)
        if f.trigger is not TriggerKind.COMMENT:
            # Spelled as the partial index's predicate, so the planner can use that index.
            where.append(_NOT_A_COMMENT)
    if f.account_id is not None:
        where.append(DmLog.account_id == f.account_id)
    return where + common_conditions(
        f, created_at=DmLog.created_at, username=DmLog.recipient_username, text=DmLog.trigger_text
    )


def log_select(workspace_id: int, f: LogFilter) -> Select[Any]:
    """The filtered log, unordered and unlimited: the base of pages, polls and the export."""
    return select(*_COLUMNS).where(*log_conditions(workspace_id, f))


def _rows(result: Sequence[Any]) -> list[LogRow]:
    return [LogRow(*row) for row in result]


@dataclass(frozen=True, slots=True)
class Page:
    rows: list[LogRow]
    older: Key | None  # cursor for the next (older) page, if there is one
    newer: Key | None  # cursor for the previous (newer) page, if this is not the first
    live: LiveWindow | None  # set on the first page only: new rows join it while it is open

    @property
    def first(self) -> bool:
        return self.newer is None


def page_select(
    workspace_id: int, f: LogFilter, *, older: Key | None, newer: Key | None, limit: int
) -> Select[Any]:
    """One keyset read: rows older than `older` newest first, or newer than `newer` oldest
    first, or (neither) the newest rows."""
    query = log_select(workspace_id, f)
    if newer is not None:
        query = query.where(paging.newer_than(DmLog.created_at, DmLog.id, newer))
        return query.order_by(*_OLDEST_FIRST).limit(limit)
    if older is not None:
        query = query.where(older_than(older))
    return query.order_by(*NEWEST_FIRST).limit(limit)


async def fetch_page(
    session: AsyncSession,
    workspace_id: int,
    f: LogFilter,
    *,
    before: Key | None = None,
    after: Key | None = None,
    size: int = PAGE_SIZE,
) -> Page:
    async def fetch(older: Key | None, newer: Key | None, limit: int) -> list[LogRow]:
        query = page_select(workspace_id, f, older=older, newer=newer, limit=limit)
        return _rows((await session.execute(query)).all())

    paged = await keyset_page(fetch, before=before, after=after, size=size)
    live = None
    if paged.first:
        live = LiveWindow.start([row.key for row in paged.rows], page_full=paged.more)
    return Page(paged.rows, older=paged.older, newer=paged.newer, live=live)


def new_rows_select(workspace_id: int, f: LogFilter, window: LiveWindow) -> Select[Any]:
    query = log_select(workspace_id, f).where(
        paging.newer_than(DmLog.created_at, DmLog.id, window.floor)
    )
    if window.shown:
        query = query.where(DmLog.id.not_in([key.id for key in window.shown]))
    return query.order_by(*_OLDEST_FIRST).limit(NEW_ROWS_PER_POLL)


async def fetch_new(
    session: AsyncSession, workspace_id: int, f: LogFilter, window: LiveWindow
) -> list[LogRow]:
    """Rows for the first page that it does not show yet, newest first."""
    found = _rows((await session.execute(new_rows_select(workspace_id, f, window))).all())
    return list(reversed(found))


def parse_versions(values: Sequence[str]) -> dict[int, int]:
    """`id:version` pairs the page sends back for the rows it shows that may still change."""
    versions: dict[int, int] = {}
    for value in values[:MAX_LIVE_ROWS]:
        raw_id, _, raw_version = value.partition(":")
        row_id = parse_id(raw_id)
        version = parse_int(raw_version, low=0, high=BIGINT_MAX)
        if row_id is not None and version is not None:
            versions[row_id] = version
    return versions


async def fetch_changed(
    session: AsyncSession, workspace_id: int, versions: dict[int, int]
) -> list[LogRow]:
    """The rows among `versions` whose `updated_at` moved since the page drew them."""
    if not versions:
        return []
    rows = _rows(
        (
            await session.execute(
                select(*_COLUMNS).where(
                    DmLog.workspace_id == workspace_id, DmLog.id.in_(list(versions))
                )
            )
        ).all()
    )
    return [row for row in rows if row.version != versions[row.id]]


async def fetch_row(session: AsyncSession, workspace_id: int, dm_log_id: int) -> LogRow | None:
    found = (
        await session.execute(
            select(*_COLUMNS).where(DmLog.workspace_id == workspace_id, DmLog.id == dm_log_id)
        )
    ).first()
    return LogRow(*found) if found else None


@dataclass(frozen=True, slots=True)
class Names:
    """Account usernames and campaign names of a workspace, for labels and filter menus."""

    accounts: dict[int, str]
    campaigns: dict[int, str]


async def workspace_names(session: AsyncSession, workspace_id: int) -> Names:
    accounts = await session.execute(
        select(InstagramAccount.id, InstagramAccount.username)
        .where(InstagramAccount.workspace_id == workspace_id)
        .order_by(InstagramAccount.username)
    )
    campaigns = await session.execute(
        select(Campaign.id, Campaign.name)
        .where(Campaign.workspace_id == workspace_id)
        .order_by(Campaign.name, Campaign.id)
    )
    return Names(dict(accounts.tuples().all()), dict(campaigns.tuples().all()))


# --- one row's timeline ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Timeline:
    log: DmLog
    row: LogRow
    comment: Comment | None  # the ledger entry (comment triggers)
    attempts: list[DeliveryAttempt]
    source: LogRow | None  # the row a follow-up or postback reveal came from

    @property
    def decision(self) -> dict[str, Any]:
        return (self.comment.decision if self.comment else None) or {}

    @property
    def evidence(self) -> dict[str, Any]:
        return self.log.pr_evidence or {}

    @property
    def read_as_digits(self) -> str | None:
        """For a DM or story reply: the word its number-code keyword was read from, if so."""
        if self.comment is not None or not self.log.matched_keyword:
            return None
        return read_from(self.log.trigger_text or "", self.log.matched_keyword)


async def fetch_timeline(
    session: AsyncSession, workspace_id: int, dm_log_id: int
) -> Timeline | None:
    log = (
        await session.execute(
            select(DmLog).where(DmLog.id == dm_log_id, DmLog.workspace_id == workspace_id)
        )
    ).scalar_one_or_none()
    if log is None:
        return None
    # The summary comes from the same read, so the version the page polls with always
    # matches the evidence shown next to it.
    row = LogRow(*(getattr(log, column.key) for column in _COLUMNS))
    comment = None
    if log.comment_row_id is not None:
        comment = await session.get(Comment, log.comment_row_id)
    attempts = list(
        (
            await session.scalars(
                select(DeliveryAttempt)
                .where(DeliveryAttempt.dm_log_id == dm_log_id)
                .order_by(DeliveryAttempt.id)
            )
        ).all()
    )
    source = None
    if log.source_log_id is not None:
        source = await fetch_row(session, workspace_id, log.source_log_id)
    return Timeline(log=log, row=row, comment=comment, attempts=attempts, source=source)


def unconfirmed_why(timeline: Timeline) -> str:
    """Why an UNCONFIRMED DM may have arrived, in the words its cause was recorded with (a
    timeout, Meta's error, a worker that stopped after its request left); Meta's codes are
    shown beside it, not in it."""
    reason = (timeline.log.pr_error_message or "").strip().rstrip(".")
    if not reason:
        return "Instagram's answer was lost or unclear, so this DM may have arrived."
    return f"{reason[0].upper()}{reason[1:]}."


def state_sentence(timeline: Timeline) -> str:
    """A short sentence for what the private reply's state means right now."""
    row = timeline.row
    state = row.pr_state
    if state is LegState.SENT:
        confirmed = timeline.evidence.get("confirmed_by")
        if confirmed == "meta_already_used":
            return "Sent. An earlier send's answer was lost; Instagram later confirmed it arrived."
        if confirmed == "conversations_api":
            return "Sent. The answer was lost; the message was found in the conversation."
        return "Sent."
    if state is LegState.UNCONFIRMED:
        return "We may already have sent this: we do not know whether it arrived."
    if state is LegState.FAILED:
        return "Not sent: Instagram refused it, or every attempt failed."
    if state is LegState.PENDING:
        return "Waiting to be sent."
    if state is LegState.IN_FLIGHT:
        return "Being sent right now."
    reason = SKIP_REASONS.get(state, state.value.removeprefix("SKIPPED_").replace("_", " "))
    return f"Not sent: {reason.lower()}."
