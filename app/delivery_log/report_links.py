"""Shared report links: an owner makes a read-only address for one campaign's report.

A token is `secrets.token_urlsafe(32)`; only its SHA-256 is stored (`campaign_report_links`,
unique), and the address (`{PUBLIC_BASE_URL}/r/{token}`) is returned once, when the link is
made. Lookup is by the hash: the database compares digests of the visitor's token, never the
token, so how long a lookup takes says nothing about a stored one; the row's hash is compared
again with `hmac.compare_digest` before it is believed.

Making and revoking are one statement each, whose WHERE also says "the actor is an owner of
this workspace and the campaign is in it", so a member or admin who posts the form anyway
changes nothing. A campaign holds at most `MAX_ACTIVE_LINKS` working links.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, exists, func, literal, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Campaign, CampaignReportLink, Role, User, Workspace, WorkspaceMember

REPORT_PATH = "/r/"
MAX_ACTIVE_LINKS = 20
# What `token_urlsafe(32)` makes: 43 characters of the URL-safe alphabet. Anything else is
# not one of ours, and is refused before the database is asked.
_TOKEN = re.compile(r"^[A-Za-z0-9_-]{43}$")


def new_report_token() -> str:
    return secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    """What is stored and looked up: the SHA-256 of the token, in hex."""
    return hashlib.sha256(token.encode()).hexdigest()


def report_url(public_base_url: str, token: str) -> str:
    return f"{public_base_url.rstrip('/')}{REPORT_PATH}{token}"


def _is_owner(workspace_id: int, user_id: int) -> ColumnElement[bool]:
    return exists().where(
        WorkspaceMember.workspace_id == workspace_id,
        WorkspaceMember.user_id == user_id,
        WorkspaceMember.role == Role.OWNER,
    )


@dataclass(frozen=True, slots=True)
class ReportLinkCreated:
    link_id: int
    token: str
    created_at: datetime


async def create_report_link(
    session: AsyncSession, *, workspace_id: int, campaign_id: int, user_id: int
) -> ReportLinkCreated | None:
    """A new link to the campaign's report, in the caller's transaction; None when the user
    is not an owner, the campaign is not this workspace's, or it has enough links."""
    token = new_report_token()
    active = (
        select(func.count())
        .select_from(CampaignReportLink)
        .where(
            CampaignReportLink.campaign_id == campaign_id,
            CampaignReportLink.revoked_at.is_(None),
        )
        .scalar_subquery()
    )
    rows = select(
        literal(workspace_id), literal(campaign_id), literal(hash_token(token)), literal(user_id)
    ).where(
        _is_owner(workspace_id, user_id),
        exists().where(Campaign.id == campaign_id, Campaign.workspace_id == workspace_id),
        active < MAX_ACTIVE_LINKS,
    )
    created = (
        await session.execute(
            insert(CampaignReportLink)
            .from_select(["workspace_id", "campaign_id", "token_hash", "created_by"], rows)
            .returning(CampaignReportLink.id, CampaignReportLink.created_at)
        )
    ).one_or_none()
    if created is None:
        return None
    return ReportLinkCreated(link_id=created[0], token=token, created_at=created[1])


async def revoke_report_link(
    session: AsyncSession, *, workspace_id: int, campaign_id: int, link_id: int, user_id: int
) -> bool:
    """Stop a link working, at once; False when there was no such working link the user may
    revoke."""
    revoked = await session.scalar(
        update(CampaignReportLink)
        .where(
            CampaignReportLink.id == link_id,
            CampaignReportLink.workspace_id == workspace_id,
            CampaignReportLink.campaign_id == campaign_id,
            CampaignReportLink.revoked_at.is_(None),
            _is_owner(workspace_id, user_id),
        )
        .values(revoked_at=func.now())
        .returning(CampaignReportLink.id)
    )
    return revoked is not None


@dataclass(frozen=True, slots=True)
class ReportLinkRow:
    id: int
    created_at: datetime
    created_by: str | None


async def active_links(
    session: AsyncSession, *, workspace_id: int, campaign_id: int
) -> list[ReportLinkRow]:
    """The campaign's working links, newest first (their addresses are not known any more)."""
    rows = (
        await session.execute(
            select(CampaignReportLink.id, CampaignReportLink.created_at, User.email)
            .outerjoin(User, User.id == CampaignReportLink.created_by)
            .where(
                CampaignReportLink.workspace_id == workspace_id,
                CampaignReportLink.campaign_id == campaign_id,
                CampaignReportLink.revoked_at.is_(None),
            )
            .order_by(CampaignReportLink.created_at.desc(), CampaignReportLink.id.desc())
            .limit(MAX_ACTIVE_LINKS)
        )
    ).all()
    return [ReportLinkRow(id=row[0], created_at=row[1], created_by=row[2]) for row in rows]


@dataclass(frozen=True, slots=True)
class SharedCampaign:
    workspace_id: int
    campaign_id: int
    # The workspace's IANA zone, for the report's times.
    time_zone: str


async def find_shared_campaign(session: AsyncSession, token: str) -> SharedCampaign | None:
    """The campaign a working link's token opens; None for anything else (unknown, revoked,
    malformed)."""
    if not _TOKEN.match(token):
        return None
    wanted = hash_token(token)
    row = (
        await session.execute(
            select(
                CampaignReportLink.token_hash,
                CampaignReportLink.workspace_id,
                CampaignReportLink.campaign_id,
                Workspace.time_zone,
            )
            .join(Workspace, Workspace.id == CampaignReportLink.workspace_id)
            .where(
                CampaignReportLink.token_hash == wanted,
                CampaignReportLink.revoked_at.is_(None),
            )
        )
    ).one_or_none()
    if row is None or not hmac.compare_digest(row[0], wanted):
        return None
    return SharedCampaign(workspace_id=row[1], campaign_id=row[2], time_zone=row[3])
