"""The misses view: comments in the ledger that triggered nothing, and why; the account's own
comments only when the reason filter asks for them.

The ledger (`comments`) is keyed by account, not workspace, so a page is one `UNION ALL` of
a newest-first read per account of the workspace, each walking the partial index
`ix_comments_misses (account_id, created_at DESC, id DESC) WHERE outcome = 'missed'` and
stopping after a page; PostgreSQL merges them (Merge Append) and keeps the newest.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Select, select, union_all
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Comment, CommentOutcome, InstagramAccount, MissReason, SeenVia
from app.delivery_log.filters import Key, MissFilter
from app.delivery_log.paging import Paged, keyset_page, newer_than, older_than
from app.delivery_log.queries import PAGE_SIZE, common_conditions

# Why a comment did not trigger, as the creator reads it.
MISS_REASONS: dict[str, str] = {
    MissReason.NO_KEYWORD: "No keyword of an active campaign on this post appears in it",
    MissReason.EXCLUDED_KEYWORD: "A matching campaign excludes a word in it",
    MissReason.OWN_COMMENT: "Your own comment",
    MissReason.NO_ACTIVE_CAMPAIGN: "The account had no active campaign",
    MissReason.NO_CAMPAIGN_FOR_POST: "No active campaign watches this post",
    MissReason.REPLY_TO_COMMENT: "A reply inside a comment thread",
    MissReason.UNKNOWN_ACCOUNT: "The account is not connected here",
    MissReason.ACCOUNT_INACTIVE: "The account was disconnected",
    MissReason.EMPTY_TEXT: "The comment has no text",
    MissReason.BEFORE_ACTIVATION: "Written before the campaign was activated",
}
# What each campaign made of a comment (the ledger's decision).
VERDICTS: dict[str, str] = {
    "won": "answered it",
    "lost": "also matched, but ranked lower",
    "wrong_post": "watches another post",
    "not_bound": "waits for your next post",
    "inactive": "not active",
    "before_activation": "activated after the comment",
    "excluded": "excluded keyword",
    "no_keyword": "no keyword in the comment",
}


@dataclass(frozen=True, slots=True)
class MissRow:
    id: int
    created_at: datetime
    account_id: int
    comment_id: str
    media_id: str | None
    text: str
    commenter_username: str | None
    commented_at: datetime
    first_seen_via: SeenVia
    miss_reason: MissReason | None
    decision: dict[str, Any] | None

    @property
    def key(self) -> Key:
        return Key.of(self.created_at, self.id)

    @property
    def reason_text(self) -> str:
        if self.miss_reason is None:
            return "No reason recorded"
        return MISS_REASONS.get(self.miss_reason, self.miss_reason.value.replace("_", " "))

    @property
    def considered(self) -> list[dict[str, Any]]:
        items = (self.decision or {}).get("considered") or []
        return [item for item in items if isinstance(item, dict)]


_COLUMNS = (
    Comment.id,
    Comment.created_at,
    Comment.account_id,
    Comment.comment_id,
    Comment.media_id,
    Comment.text,
    Comment.commenter_username,
    Comment.commented_at,
    Comment.first_seen_via,
    Comment.miss_reason,
    Comment.decision,
)


def _conditions(f: MissFilter) -> list[ColumnElement[bool]]:
    where: list[ColumnElement[bool]] = [Comment.outcome == CommentOutcome.MISSED]
    if f.reason is not None:
        where.append(Comment.miss_reason == f.reason)
    else:
        # The creator's own comments (their public replies, mostly) are no missed fan: shown
        # only when asked for by their reason.
        where.append(Comment.miss_reason.is_distinct_from(MissReason.OWN_COMMENT))
    return where + common_conditions(
        f, created_at=Comment.created_at, username=Comment.commenter_username, text=Comment.text
    )


def misses_select(
    account_ids: list[int],
    f: MissFilter,
    *,
    older: Key | None,
    newer: Key | None,
    limit: int,
) -> Select[Any]:
    """One keyset read over these accounts' misses (see the module docstring)."""
    where = _conditions(f)
    if older is not None:
        where.append(older_than(Comment.created_at, Comment.id, older))
    if newer is not None:
        where.append(newer_than(Comment.created_at, Comment.id, newer))
    upwards = newer is not None

    def order(created: Any, row_id: Any) -> tuple[Any, Any]:
        if upwards:
            return created.asc(), row_id.asc()
        return created.desc(), row_id.desc()

    parts = [
        select(*_COLUMNS)
        .where(Comment.account_id == account_id, *where)
        .order_by(*order(Comment.created_at, Comment.id))
        .limit(limit)
        for account_id in account_ids
    ]
    merged = union_all(*parts).subquery()
    return select(merged).order_by(*order(merged.c.created_at, merged.c.id)).limit(limit)


async def misses_accounts(session: AsyncSession, workspace_id: int, f: MissFilter) -> list[int]:
    """The workspace's accounts the filter asks about."""
    found = (
        await session.scalars(
            select(InstagramAccount.id).where(InstagramAccount.workspace_id == workspace_id)
        )
    ).all()
    return [a for a in found if f.account_id is None or a == f.account_id]


async def fetch_misses(
    session: AsyncSession,
    workspace_id: int,
    f: MissFilter,
    *,
    before: Key | None = None,
    after: Key | None = None,
    size: int = PAGE_SIZE,
) -> Paged[MissRow]:
    accounts = await misses_accounts(session, workspace_id, f)

    async def fetch(older: Key | None, newer: Key | None, limit: int) -> list[MissRow]:
        if not accounts:
            return []
        query = misses_select(accounts, f, older=older, newer=newer, limit=limit)
        return [MissRow(*row) for row in (await session.execute(query)).all()]

    return await keyset_page(fetch, before=before, after=after, size=size)
