"""Next-post binding: a `next_post` campaign takes the first post or reel published after it
was armed, and the comments that post already has are not lost.

Runs as a cron (every minute); `request_binding` asks for a run for one account at once
(nothing calls it yet: an armed campaign waits for the cron). For each account with waiting
campaigns (active, `next_post`, armed, no `media_id`):

1. Read the account's media, newest first, a page or two: only as far back as the oldest
   arming time. Posts and reels count (`FEED`, `REELS`); ads and stories do not.
2. Under a per-account advisory lock (so concurrent binders decide one at a time), plan with
   `plan_bindings`: waiting campaigns in arming order, **oldest armed first**, each take the
   earliest post published at or after the second they were armed that no active campaign
   targets and no earlier-armed campaign took in this round. Two armed campaigns and one new
   reel: the older one binds, the newer one waits for the next post. A post another active
   campaign already answers is refused for binding (one `next_post_media_taken` event per
   campaign and post) and the campaign waits for a later one.
3. Bind with ONE conditional UPDATE (`WHERE media_id IS NULL AND scope = 'next_post' AND
   status = 'active'`, version bumped), so a campaign binds once whoever runs this, and an
   editor's form opened before the binding is refused instead of overwriting it.
4. After the commit, sweep the newly bound media with the reconciler (72 h and `activated_at`
   rules apply): comments made between publication and binding get their DM too, those the
   webhook already recorded as misses ("no campaign watches this post") included, once.

Meta's timestamps have whole seconds, so "after arming" compares with the arming second: a
post published in the very second the campaign was armed counts as next.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from redis.exceptions import RedisError
from saq import Queue
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.accounts.tokens import MissingTokenError, open_access_token
from app.crypto import TokenDecryptError
from app.db.models import CampaignScope, EventLevel, InstagramAccount
from app.delivery.recovery.reconcile import reconcile_media
from app.instagram.graph import GraphError
from app.operations.events import record_event, record_event_once
from app.queue import JobName, enqueue
from app.resources import Resources

logger = logging.getLogger("oncereply.next_post")

MEDIA_PAGE = 50
MAX_MEDIA_PAGES = 2
BINDABLE_PRODUCTS = frozenset({"FEED", "REELS"})
# A refused post is reported again only if it is still refused after this long.
REFUSAL_NOTICE_EVERY = timedelta(days=7)

_WAITING = text(
    """
SELECT c.id, c.account_id, c.workspace_id, c.name, c.armed_at
FROM campaigns c JOIN instagram_accounts a ON a.id = c.account_id
WHERE c.status = 'active' AND c.scope = 'next_post' AND c.media_id IS NULL
  AND c.armed_at IS NOT NULL AND a.status = 'active'
  AND (CAST(:account_id AS bigint) IS NULL OR c.account_id = :account_id)
ORDER BY c.account_id, c.armed_at, c.id
"""
)
_LOCK = text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))")
_TAKEN = text(
    """
SELECT media_id, name, scope FROM campaigns
WHERE account_id = :account_id AND status = 'active' AND media_id IS NOT NULL
ORDER BY id
"""
)
_BIND = text(
    """
UPDATE campaigns SET media_id = :media_id, media_caption = :caption, version = version + 1,
    updated_at = now()
WHERE id = :id AND media_id IS NULL AND scope = 'next_post' AND status = 'active'
RETURNING version
"""
)


@dataclass(frozen=True, slots=True)
class Waiting:
    """A campaign waiting for its post."""

    id: int
    name: str
    armed_at: datetime


@dataclass(frozen=True, slots=True)
class Published:
    """A media of the account as `/media` lists it."""

    id: str
    published_at: datetime
    product_type: str | None = None
    caption: str | None = None

    @property
    def bindable(self) -> bool:
        return self.product_type is None or self.product_type in BINDABLE_PRODUCTS


@dataclass(frozen=True, slots=True)
class Binding:
    campaign: Waiting
    media: Published


@dataclass(frozen=True, slots=True)
class Refusal:
    """`campaign` would have taken `media`, but the campaign `taken_by` already targets it."""

    campaign: Waiting
    media: Published
    taken_by: str


@dataclass(slots=True)
class BindReport:
    bound: list[tuple[int, str]] = field(default_factory=list)  # (campaign id, media id)
    refused: list[tuple[int, str]] = field(default_factory=list)
    waiting: list[int] = field(default_factory=list)
    recovered: int = 0  # deliveries from the backfill of newly bound media
    errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "bound": self.bound,
            "refused": self.refused,
            "waiting": self.waiting,
            "recovered": self.recovered,
            "errors": self.errors,
        }


async def request_binding(queue: Queue, account_id: int) -> bool:
    """Ask the worker to bind the account's waiting campaigns now (after arming one)."""
    try:
        job = await enqueue(
            queue,
            JobName.BIND_NEXT_POSTS,
            key=f"bind-next-post:{account_id}",
            account_id=account_id,
        )
    except (RedisError, OSError):
        logger.warning("could not request next-post binding for account %s", account_id)
        return False
    return job is not None


def plan_bindings(
    waiting: Sequence[Waiting],
    media: Sequence[Published],
    *,
    targeted: Mapping[str, str],
    bound: Collection[str] = (),
) -> tuple[list[Binding], list[Refusal]]:
    """Which waiting campaign takes which post (see the module docstring).

    `targeted` maps the media that active post-scoped campaigns answer to one such campaign's
    name (a conflict worth telling the creator about); `bound` are media active next-post
    campaigns took earlier (the queue working as intended, passed over silently).
    """
    oldest_first = sorted((m for m in media if m.bindable), key=lambda m: (m.published_at, m.id))
    used = set(targeted) | set(bound)
    bindings: list[Binding] = []
    refusals: list[Refusal] = []
    for campaign in sorted(waiting, key=lambda w: (w.armed_at, w.id)):
        armed_second = campaign.armed_at.replace(microsecond=0)
        for candidate in oldest_first:
            if candidate.published_at < armed_second:
                continue
            if candidate.id in targeted:
                refusals.append(Refusal(campaign, candidate, targeted[candidate.id]))
                continue
            if candidate.id in used:
                continue  # an earlier-armed campaign took it in this round
            bindings.append(Binding(campaign, candidate))
            used.add(candidate.id)
            break
    return bindings, refusals


async def bind_next_posts(resources: Resources, *, account_id: int | None = None) -> BindReport:
    """Bind waiting next-post campaigns (of one account, or all) and backfill their posts."""
    report = BindReport()
    async with resources.sessionmaker() as session:
        rows = (await session.execute(_WAITING, {"account_id": account_id})).all()
    accounts = sorted({row.account_id for row in rows})
    for account in accounts:
        bound = await _bind_account(resources, account, report)
        if bound:
            swept = await reconcile_media(resources, account, bound)
            report.recovered += swept.recovered
            report.errors.extend(swept.errors)
    if report.bound or report.refused or report.errors:
        logger.info("next-post binding: %s", report.as_dict())
    return report


async def _bind_account(resources: Resources, account_id: int, report: BindReport) -> list[str]:
    """Bind this account's waiting campaigns; returns the media ids bound."""
    async with resources.sessionmaker() as session:
        account = await session.get(InstagramAccount, account_id)
        if account is None:
            return []
        ig_user_id, workspace_id = account.ig_user_id, account.workspace_id
        try:
            token = open_access_token(resources.cipher, account)
        except (MissingTokenError, TokenDecryptError) as exc:
            report.errors.append(f"account {account_id}: no usable token ({exc})")
            return []
        waiting = await _waiting(session, account_id)
    if not waiting:
        return []
    try:
        media = await _media_since(resources, token, ig_user_id, min(w.armed_at for w in waiting))
    except GraphError as exc:
        # The next minute's run tries again; the reconciler and sends report token trouble.
        report.errors.append(f"account {account_id}: could not list media ({exc})"[:500])
        return []

    bound: list[str] = []
    async with resources.sessionmaker() as session, session.begin():
        await session.execute(_LOCK, {"key": f"next-post:{account_id}"})
        # Read again under the lock: another binder may have finished meanwhile.
        waiting = await _waiting(session, account_id)
        targeted: dict[str, str] = {}
        earlier: set[str] = set()
        for row in await session.execute(_TAKEN, {"account_id": account_id}):
            if row.scope == CampaignScope.NEXT_POST:
                earlier.add(row.media_id)
            else:
                targeted.setdefault(row.media_id, row.name)
        bindings, refusals = plan_bindings(waiting, media, targeted=targeted, bound=earlier)
        for binding in bindings:
            version = await session.scalar(
                _BIND,
                {
                    "id": binding.campaign.id,
                    "media_id": binding.media.id,
                    "caption": binding.media.caption,
                },
            )
            if version is None:
                continue  # paused, re-scoped or bound since the read: nothing to do
            bound.append(binding.media.id)
            report.bound.append((binding.campaign.id, binding.media.id))
            await _record_bound(session, workspace_id, account_id, binding)
        for refusal in refusals:
            report.refused.append((refusal.campaign.id, refusal.media.id))
            await _record_refusal(session, workspace_id, account_id, refusal)
        done = {campaign_id for campaign_id, _ in report.bound}
        report.waiting.extend(w.id for w in waiting if w.id not in done)
    return bound


async def _waiting(session: AsyncSession, account_id: int) -> list[Waiting]:
    rows = (await session.execute(_WAITING, {"account_id": account_id})).all()
    return [Waiting(row.id, row.name, row.armed_at) for row in rows]


async def _media_since(
    resources: Resources, token: str, ig_user_id: str, since: datetime
) -> list[Published]:
    """The account's media newest first, down to `since` (a page or two)."""
    found: list[Published] = []
    after: str | None = None
    floor = since.replace(microsecond=0)
    for _ in range(MAX_MEDIA_PAGES):
        page = await resources.graph.list_media(token, ig_user_id, after=after, limit=MEDIA_PAGE)
        older = False
        for item in page.items:
            published = _graph_time(item.get("timestamp"))
            if not item.get("id") or published is None:
                continue
            if published < floor:
                older = True
                continue
            product = item.get("media_product_type")
            caption = item.get("caption")
            found.append(
                Published(
                    id=str(item["id"]),
                    published_at=published,
                    product_type=product if isinstance(product, str) else None,
                    caption=caption if isinstance(caption, str) else None,
                )
            )
        if older or page.after is None:
            break
        after = page.after
    return found


def _graph_time(raw: object) -> datetime | None:
    # Graph timestamps look like `2025-06-01T12:05:02+0000`.
    try:
        return datetime.strptime(str(raw), "%Y-%m-%dT%H:%M:%S%z").astimezone(UTC)
    except ValueError:
        return None


async def _record_bound(
    session: AsyncSession, workspace_id: int, account_id: int, binding: Binding
) -> None:
    media = binding.media
    kind = "reel" if media.product_type == "REELS" else "post"
    await record_event(
        session,
        source="worker",
        level=EventLevel.INFO,
        kind="next_post_bound",
        message=(
            f'Campaign "{binding.campaign.name}" now answers comments on the {kind} '
            f"published {media.published_at:%Y-%m-%d %H:%M} UTC ({media.id})"
        ),
        workspace_id=workspace_id,
        account_id=account_id,
        details={"campaign_id": binding.campaign.id, "media_id": media.id},
    )


async def _record_refusal(
    session: AsyncSession, workspace_id: int, account_id: int, refusal: Refusal
) -> None:
    await record_event_once(
        session,
        dedupe_key=f"campaign:{refusal.campaign.id}:media:{refusal.media.id}",
        within=REFUSAL_NOTICE_EVERY,
        source="worker",
        level=EventLevel.WARNING,
        kind="next_post_media_taken",
        message=(
            f'Campaign "{refusal.campaign.name}" did not take the post published '
            f"{refusal.media.published_at:%Y-%m-%d %H:%M} UTC ({refusal.media.id}): "
            f'campaign "{refusal.taken_by}" already answers its comments. '
            "It waits for the next post."
        ),
        workspace_id=workspace_id,
        account_id=account_id,
        details={"campaign_id": refusal.campaign.id, "media_id": refusal.media.id},
    )
