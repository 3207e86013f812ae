"""Creating, editing and changing the status of campaigns, always inside one workspace.

Every change is one conditional statement that names the workspace, so a campaign of another
workspace is simply "not found":

- create: `INSERT … SELECT … FROM instagram_accounts WHERE id AND workspace_id` (the account
  must belong to the workspace, checked by the same statement);
- edit: `UPDATE … SET …, version = version + 1 WHERE id AND workspace_id AND version = :seen`
  — a form opened before someone else's save is refused instead of overwriting it;
- activate / pause / archive: `UPDATE … WHERE` the current status allows it (activation is
  also pinned to the version whose completeness was checked);
- duplicate: `INSERT … SELECT` of the row, named "<name> copy", as a draft.

When a statement changes nothing, `explain_*` reads the row to say why (not found, archived,
changed meanwhile) — the answer to the person, never a second attempt at the write.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import and_, case, func, literal, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.campaigns.validation import activation_problems, input_from_values
from app.db.models import (
    AccountStatus,
    Campaign,
    CampaignScope,
    CampaignStatus,
    CampaignTrigger,
    DeliveryCount,
    DeliveryTotal,
    InstagramAccount,
    LegState,
)

_COPY_SUFFIX = " copy"
_COLUMNS = Campaign.__table__.c
# Columns the editor owns; everything else (status, version, bindings) is managed here.
EDITABLE = (
    "name",
    "account_id",
    "trigger",
    "story_id",
    "story_expires_at",
    "scope",
    "media_id",
    "media_caption",
    "match_mode",
    "keywords",
    "excluded_keywords",
    "dm_text",
    "buttons",
    "public_reply_enabled",
    "public_replies",
    "public_reply_after_dm",
    "public_reply_skip_in_backlog",
    "priority",
    "once_per_person",
    "utm_enabled",
    "opening_dm_enabled",
    "opening_dm_text",
    "opening_dm_button_title",
    "follow_gate_enabled",
    "follow_prompt_text",
    "follow_prompt_button_title",
    "follow_up_enabled",
    "follow_up_text",
    "follow_up_delay_minutes",
    "dm_trigger_enabled",
    "dm_image_url",
    "card_enabled",
    "card_title",
    "card_subtitle",
)


class Problem(StrEnum):
    NOT_FOUND = "not_found"
    ARCHIVED = "archived"
    CHANGED = "changed"  # saved by someone else since the form was opened
    ACCOUNT = "account"  # the chosen account is not in this workspace
    ACCOUNT_DISCONNECTED = "account_disconnected"
    INCOMPLETE = "incomplete"
    WRONG_STATUS = "wrong_status"


@dataclass(frozen=True, slots=True)
class Refusal:
    problem: Problem
    # For INCOMPLETE: what is missing, by form field.
    fields: Mapping[str, str] | None = None


def _in_workspace(workspace_id: int, campaign_id: int) -> Any:
    return and_(Campaign.id == campaign_id, Campaign.workspace_id == workspace_id)


async def get_campaign(
    session: AsyncSession, workspace_id: int, campaign_id: int
) -> Campaign | None:
    return (
        await session.execute(select(Campaign).where(_in_workspace(workspace_id, campaign_id)))
    ).scalar_one_or_none()


async def create_campaign(
    session: AsyncSession,
    *,
    workspace_id: int,
    user_id: int,
    values: Mapping[str, Any],
    activate: bool = False,
) -> int | None:
    """Insert the campaign; None when the account is not this workspace's (or, to activate,
    is disconnected). `values` are the editor's columns (`CampaignInput.column_values`)."""
    now = func.now()
    row: dict[str, Any] = {name: values[name] for name in EDITABLE if name != "account_id"}
    row |= {
        "workspace_id": workspace_id,
        "created_by_user_id": user_id,
        "status": CampaignStatus.ACTIVE if activate else CampaignStatus.DRAFT,
        "activated_at": now if activate else None,
        "armed_at": now if values["scope"] is CampaignScope.NEXT_POST else None,
    }
    names = ["account_id", *row]
    selected = select(
        InstagramAccount.id,
        *(
            value if value is now else literal(value, _COLUMNS[name].type)
            for name, value in row.items()
        ),
    ).where(
        InstagramAccount.id == values["account_id"],
        InstagramAccount.workspace_id == workspace_id,
    )
    if activate:
        selected = selected.where(InstagramAccount.status != AccountStatus.DISCONNECTED)
    return await session.scalar(
        insert(Campaign).from_select(names, selected).returning(Campaign.id)
    )


async def update_campaign(
    session: AsyncSession,
    *,
    workspace_id: int,
    campaign_id: int,
    seen_version: int,
    values: Mapping[str, Any],
    complete: bool,
) -> int | None:
    """Save the editor's values and bump the version; returns the new version or None.

    `complete` says whether `values` could go live: an active campaign only takes a complete
    edit (pause it first to keep an incomplete draft). A next-post campaign keeps the post it
    was bound to, and its arming time, while it stays a next-post campaign.
    """
    next_post = values["scope"] is CampaignScope.NEXT_POST
    stays_next_post = and_(Campaign.scope == CampaignScope.NEXT_POST, literal(next_post))
    changes: dict[str, Any] = {name: values[name] for name in EDITABLE}
    changes |= {
        "media_id": case((stays_next_post, Campaign.media_id), else_=values["media_id"]),
        "media_caption": case(
            (stays_next_post, Campaign.media_caption), else_=values["media_caption"]
        ),
        "armed_at": case((stays_next_post, Campaign.armed_at), else_=func.now())
        if next_post
        else None,
        "version": Campaign.version + 1,
        "updated_at": func.now(),
    }
    account_ok = select(InstagramAccount.id).where(
        InstagramAccount.id == values["account_id"],
        InstagramAccount.workspace_id == workspace_id,
    )
    statement = (
        update(Campaign)
        .where(
            _in_workspace(workspace_id, campaign_id),
            Campaign.version == seen_version,
            Campaign.status != CampaignStatus.ARCHIVED,
            literal(values["account_id"]).in_(account_ok),
        )
        .values(**changes)
        .returning(Campaign.version)
    )
    if not complete:
        statement = statement.where(Campaign.status != CampaignStatus.ACTIVE)
    version: int | None = await session.scalar(
        statement.execution_options(synchronize_session=False)
    )
    return version


async def explain_update(
    session: AsyncSession,
    *,
    workspace_id: int,
    campaign_id: int,
    seen_version: int,
    account_id: int,
) -> Refusal:
    """Why `update_campaign` changed nothing."""
    current = (
        await session.execute(
            select(Campaign.status, Campaign.version).where(
                _in_workspace(workspace_id, campaign_id)
            )
        )
    ).one_or_none()
    if current is None:
        return Refusal(Problem.NOT_FOUND)
    status, version = current
    if status is CampaignStatus.ARCHIVED:
        return Refusal(Problem.ARCHIVED)
    if version != seen_version:
        return Refusal(Problem.CHANGED)
    owned = await session.scalar(
        select(InstagramAccount.id).where(
            InstagramAccount.id == account_id, InstagramAccount.workspace_id == workspace_id
        )
    )
    if owned is None:
        return Refusal(Problem.ACCOUNT)
    return Refusal(Problem.INCOMPLETE)


async def activate_campaign(
    session: AsyncSession, workspace_id: int, campaign_id: int
) -> Refusal | None:
    """Make a draft or paused campaign live (None on success); it must be complete."""
    campaign = await get_campaign(session, workspace_id, campaign_id)
    if campaign is None:
        return Refusal(Problem.NOT_FOUND)
    if campaign.status not in {CampaignStatus.DRAFT, CampaignStatus.PAUSED}:
        return Refusal(Problem.WRONG_STATUS)
    missing = activation_problems(
        input_from_values({name: getattr(campaign, name) for name in EDITABLE})
    )
    if missing:
        return Refusal(Problem.INCOMPLETE, missing)
    activated = await session.scalar(
        update(Campaign)
        .where(
            _in_workspace(workspace_id, campaign_id),
            # Completeness was checked on this version; an edit in between must be checked anew.
            Campaign.version == campaign.version,
            Campaign.status.in_([CampaignStatus.DRAFT, CampaignStatus.PAUSED]),
            Campaign.account_id.in_(
                select(InstagramAccount.id).where(
                    InstagramAccount.workspace_id == workspace_id,
                    InstagramAccount.status != AccountStatus.DISCONNECTED,
                )
            ),
        )
        .values(
            status=CampaignStatus.ACTIVE,
            activated_at=func.now(),
            # An unbound next-post campaign waits for the first post published from *now*:
            # a draft armed days ago must not grab a post that predates going live.
            armed_at=case(
                (
                    and_(Campaign.scope == CampaignScope.NEXT_POST, Campaign.media_id.is_(None)),
                    func.now(),
                ),
                else_=Campaign.armed_at,
            ),
            updated_at=func.now(),
        )
        .returning(Campaign.id)
        .execution_options(synchronize_session=False)
    )
    if activated is not None:
        return None
    account_status = await session.scalar(
        select(InstagramAccount.status).where(InstagramAccount.id == campaign.account_id)
    )
    if account_status is AccountStatus.DISCONNECTED:
        return Refusal(Problem.ACCOUNT_DISCONNECTED)
    return Refusal(Problem.CHANGED)


async def _set_status(
    session: AsyncSession,
    workspace_id: int,
    campaign_id: int,
    to: CampaignStatus,
    allowed_from: set[CampaignStatus],
) -> Refusal | None:
    changed = await session.scalar(
        update(Campaign)
        .where(_in_workspace(workspace_id, campaign_id), Campaign.status.in_(allowed_from))
        .values(status=to, updated_at=func.now())
        .returning(Campaign.id)
        .execution_options(synchronize_session=False)
    )
    if changed is not None:
        return None
    exists = await session.scalar(
        select(Campaign.id).where(_in_workspace(workspace_id, campaign_id))
    )
    return Refusal(Problem.WRONG_STATUS if exists else Problem.NOT_FOUND)


async def pause_campaign(
    session: AsyncSession, workspace_id: int, campaign_id: int
) -> Refusal | None:
    return await _set_status(
        session, workspace_id, campaign_id, CampaignStatus.PAUSED, {CampaignStatus.ACTIVE}
    )


async def archive_campaign(
    session: AsyncSession, workspace_id: int, campaign_id: int
) -> Refusal | None:
    return await _set_status(
        session,
        workspace_id,
        campaign_id,
        CampaignStatus.ARCHIVED,
        {CampaignStatus.DRAFT, CampaignStatus.ACTIVE, CampaignStatus.PAUSED},
    )


async def duplicate_campaign(
    session: AsyncSession, *, workspace_id: int, campaign_id: int, user_id: int
) -> int | None:
    """A draft copy named "<name> copy"; None when the campaign is not this workspace's."""
    copied = [name for name in EDITABLE if name != "name"]
    name = func.left(Campaign.name, 100 - len(_COPY_SUFFIX)) + _COPY_SUFFIX
    armed_at = case((Campaign.scope == CampaignScope.NEXT_POST, func.now()), else_=None)
    # A next-post copy waits for a post of its own rather than sharing the original's.
    media_id = case((Campaign.scope == CampaignScope.NEXT_POST, None), else_=Campaign.media_id)
    media_caption = case(
        (Campaign.scope == CampaignScope.NEXT_POST, None), else_=Campaign.media_caption
    )
    overrides = {"media_id": media_id, "media_caption": media_caption}
    selected = select(
        *(overrides.get(column, getattr(Campaign, column)) for column in copied),
        name,
        literal(workspace_id),
        literal(CampaignStatus.DRAFT.value),
        armed_at,
        literal(user_id),
    ).where(_in_workspace(workspace_id, campaign_id))
    return await session.scalar(
        insert(Campaign)
        .from_select(
            [*copied, "name", "workspace_id", "status", "armed_at", "created_by_user_id"],
            selected,
        )
        .returning(Campaign.id)
    )


# --- the list page ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CampaignSummary:
    id: int
    name: str
    status: CampaignStatus
    scope: CampaignScope
    media_id: str | None
    media_caption: str | None
    keywords: list[str]
    match_mode: str
    priority: int
    account_id: int
    account_username: str
    version: int
    updated_at: datetime
    sent_today: int
    failed_today: int
    unconfirmed_today: int
    skipped_today: int
    # Deliveries not yet sent, whatever day their comment came: PENDING (or being sent).
    waiting: int = 0
    trigger: CampaignTrigger = CampaignTrigger.COMMENTS
    story_id: str | None = None
    story_expires_at: datetime | None = None

    @property
    def story_ended(self) -> bool:
        """A one-story campaign whose story is no longer live: it answers nothing more."""
        ends = self.story_expires_at
        return ends is not None and ends <= datetime.now(UTC)


def start_of_today(now: datetime | None = None) -> datetime:
    """Midnight UTC: "today" for the counts on the campaign list."""
    now = now or datetime.now(UTC)
    return now.replace(hour=0, minute=0, second=0, microsecond=0)


async def list_campaigns(
    session: AsyncSession,
    workspace_id: int,
    *,
    archived: bool = False,
    since: datetime | None = None,
) -> list[CampaignSummary]:
    """The workspace's campaigns (archived ones only when asked) with today's DM counts:
    `since` is the start of the workspace's day (midnight UTC when not given), and how many
    of each campaign's deliveries are still waiting. Both from the kept counts
    (`app.db.models.delivery_counts`: today's slices, and the totals, a few rows per campaign),
    never a count over its deliveries."""
    # Today's from the kept 15-minute slices (a day in any zone is a whole number of them),
    # over `ix_delivery_counts_ws_quarter`; each skipped state has its own column.
    skipped = [getattr(DeliveryCount, s.value.lower()) for s in LegState if s.is_skip]
    today = (
        select(
            DeliveryCount.campaign_id.label("campaign_id"),
            func.sum(DeliveryCount.sent).label("sent"),
            func.sum(DeliveryCount.failed).label("failed"),
            func.sum(DeliveryCount.unconfirmed).label("unconfirmed"),
            func.sum(sum(skipped[1:], skipped[0])).label("skipped"),
        )
        .where(
            DeliveryCount.workspace_id == workspace_id,
            DeliveryCount.quarter >= (since or start_of_today()),
        )
        .group_by(DeliveryCount.campaign_id)
        .subquery()
    )
    waiting = (
        select(
            DeliveryTotal.campaign_id.label("campaign_id"),
            func.sum(DeliveryTotal.unsettled).label("waiting"),
        )
        .where(DeliveryTotal.workspace_id == workspace_id)
        .group_by(DeliveryTotal.campaign_id)
        .subquery()
    )
    status_filter = (
        Campaign.status == CampaignStatus.ARCHIVED
        if archived
        else Campaign.status != CampaignStatus.ARCHIVED
    )
    rows = await session.execute(
        select(
            Campaign,
            InstagramAccount.username,
            func.coalesce(today.c.sent, 0),
            func.coalesce(today.c.failed, 0),
            func.coalesce(today.c.unconfirmed, 0),
            func.coalesce(today.c.skipped, 0),
            func.coalesce(waiting.c.waiting, 0),
        )
        .join(InstagramAccount, InstagramAccount.id == Campaign.account_id)
        .outerjoin(today, today.c.campaign_id == Campaign.id)
        .outerjoin(waiting, waiting.c.campaign_id == Campaign.id)
        .where(Campaign.workspace_id == workspace_id, status_filter)
        .order_by(
            case(
                (Campaign.status == CampaignStatus.ACTIVE, 0),
                (Campaign.status == CampaignStatus.PAUSED, 1),
                else_=2,
            ),
            Campaign.created_at.desc(),
            Campaign.id.desc(),
        )
    )
    return [
        CampaignSummary(
            id=c.id,
            name=c.name,
            status=c.status,
            scope=c.scope,
            media_id=c.media_id,
            media_caption=c.media_caption,
            keywords=list(c.keywords),
            match_mode=c.match_mode.value,
            priority=c.priority,
            account_id=c.account_id,
            account_username=username,
            version=c.version,
            updated_at=c.updated_at,
            sent_today=sent,
            failed_today=failed,
            unconfirmed_today=unconfirmed,
            skipped_today=skipped,
            waiting=int(pending),
            trigger=c.trigger,
            story_id=c.story_id,
            story_expires_at=c.story_expires_at,
        )
        for c, username, sent, failed, unconfirmed, skipped, pending in rows.all()
    ]


async def count_by_status(session: AsyncSession, workspace_id: int) -> dict[CampaignStatus, int]:
    rows = await session.execute(
        select(Campaign.status, func.count())
        .where(Campaign.workspace_id == workspace_id)
        .group_by(Campaign.status)
    )
    return dict(rows.tuples().all())
