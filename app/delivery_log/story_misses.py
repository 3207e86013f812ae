"""The misses view's story replies and story mentions: those no campaign answered, and why.

A story reply that neither a story campaign nor a DM keyword answered, and a story mention no
campaign thanked, are in the messaging ledger with the reason ingest noted
(`details.story_miss`, `app.campaigns.story_matching.StoryMiss`). A page reads them newest
first over the workspace's accounts through the partial index
`ix_messaging_events_story_misses (account_id, created_at DESC, id DESC)`, with the same
filters (account, search, dates) and keyset paging as the comments' misses.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Boolean, ColumnElement, literal_column, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.campaigns.story_matching import StoryMiss
from app.db.models import MessagingEvent
from app.delivery_log.filters import Key, MissFilter
from app.delivery_log.misses import misses_accounts
from app.delivery_log.paging import Paged, keyset_page, newer_than, older_than
from app.delivery_log.queries import PAGE_SIZE, like_pattern

# Why no DM, as the creator reads it.
STORY_MISS_WORDS: dict[str, str] = {
    StoryMiss.NO_CAMPAIGN: "No active campaign answers these",
    StoryMiss.BEFORE_ACTIVATION: "Sent before the campaign was activated",
    StoryMiss.OTHER_STORY: "The campaigns watch another story, or its story had ended",
    StoryMiss.EXCLUDED: "A matching campaign excludes a word in it",
    StoryMiss.NO_KEYWORD: "No keyword of a story campaign appears in it",
}
# Matches the partial index's predicate literally, so the planner can use it.
_HAS_STORY_MISS = literal_column("messaging_events.details ? 'story_miss'", Boolean)


@dataclass(frozen=True, slots=True)
class StoryMissRow:
    id: int
    created_at: datetime
    account_id: int
    user_id: str | None
    text: str | None
    details: dict[str, Any]

    @property
    def key(self) -> Key:
        return Key.of(self.created_at, self.id)

    @property
    def is_mention(self) -> bool:
        return self.details.get("story") == "mention"

    @property
    def story_id(self) -> str | None:
        value = self.details.get("story_id")
        return value if isinstance(value, str) else None

    @property
    def reason_text(self) -> str:
        reason = str(self.details.get("story_miss") or "")
        return STORY_MISS_WORDS.get(reason, reason.replace("_", " ") or "No reason recorded")


_COLUMNS = (
    MessagingEvent.id,
    MessagingEvent.created_at,
    MessagingEvent.account_id,
    MessagingEvent.user_id,
    MessagingEvent.text,
    MessagingEvent.details,
)


def _conditions(account_ids: list[int], f: MissFilter) -> list[ColumnElement[bool]]:
    where: list[ColumnElement[bool]] = [
        MessagingEvent.account_id.in_(account_ids),
        _HAS_STORY_MISS,
    ]
    if f.since is not None:
        where.append(MessagingEvent.created_at >= f.since)
    if f.until is not None:
        where.append(MessagingEvent.created_at < f.until)
    if f.needle and not f.username_only:
        # A story reply carries no username, only the text to search.
        where.append(MessagingEvent.text.ilike(like_pattern(f.needle), escape="\\"))
    return where


async def fetch_story_misses(
    session: AsyncSession,
    workspace_id: int,
    f: MissFilter,
    *,
    before: Key | None = None,
    after: Key | None = None,
    size: int = PAGE_SIZE,
) -> Paged[StoryMissRow]:
    accounts = await misses_accounts(session, workspace_id, f)
    if f.username_only:
        accounts = []  # nothing here has a username to search

    async def fetch(older: Key | None, newer: Key | None, limit: int) -> list[StoryMissRow]:
        if not accounts:
            return []
        where = _conditions(accounts, f)
        created, row_id = MessagingEvent.created_at, MessagingEvent.id
        if older is not None:
            where.append(older_than(created, row_id, older))
        if newer is not None:
            where.append(newer_than(created, row_id, newer))
        order = (
            (created.asc(), row_id.asc()) if newer is not None else (created.desc(), row_id.desc())
        )
        query = select(*_COLUMNS).where(*where).order_by(*order).limit(limit)
        return [
            StoryMissRow(
                row.id, row.created_at, row.account_id, row.user_id, row.text, row.details or {}
            )
            for row in (await session.execute(query)).all()
        ]

    return await keyset_page(fetch, before=before, after=after, size=size)
