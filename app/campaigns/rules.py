"""Loading campaigns as `CampaignRule`s for matching: one query however many accounts.

Ingest resolves a batch's accounts (by their Instagram id, the webhook `entry.id`) and their
active campaigns together with one outer join; the dashboard loads one account's rules.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from sqlalchemy import and_, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.campaigns.matching import RULE_COLUMNS, CampaignRule
from app.db.models import (
    AccountStatus,
    Campaign,
    CampaignStatus,
    InstagramAccount,
)

_RULE_COLUMNS = tuple(getattr(Campaign, name) for name in RULE_COLUMNS)


@dataclass(frozen=True, slots=True)
class AccountRules:
    """A connected account and its active campaigns."""

    account_id: int
    workspace_id: int
    ig_user_id: str
    status: AccountStatus
    rules: tuple[CampaignRule, ...]


async def load_account_rules(
    session: AsyncSession, ig_user_ids: Collection[str]
) -> dict[str, AccountRules]:
    """Accounts with these Instagram ids (missing ones are absent) and their active rules."""
    if not ig_user_ids:
        return {}
    statement = (
        select(
            InstagramAccount.id.label("acc_id"),
            InstagramAccount.workspace_id.label("acc_workspace_id"),
            InstagramAccount.ig_user_id,
            InstagramAccount.status.label("acc_status"),
            *_RULE_COLUMNS,
        )
        .select_from(InstagramAccount)
        .outerjoin(
            Campaign,
            and_(
                Campaign.account_id == InstagramAccount.id,
                Campaign.status == CampaignStatus.ACTIVE,
            ),
        )
        .where(InstagramAccount.ig_user_id.in_(list(ig_user_ids)))
        .order_by(InstagramAccount.id, Campaign.id)
    )
    accounts: dict[str, AccountRules] = {}
    rules: dict[str, list[CampaignRule]] = {}
    for row in (await session.execute(statement)).mappings():
        ig_user_id = row["ig_user_id"]
        if ig_user_id not in accounts:
            accounts[ig_user_id] = AccountRules(
                account_id=row["acc_id"],
                workspace_id=row["acc_workspace_id"],
                ig_user_id=ig_user_id,
                status=AccountStatus(row["acc_status"]),
                rules=(),
            )
            rules[ig_user_id] = []
        if row["id"] is not None:
            rules[ig_user_id].append(CampaignRule.from_mapping(row))
    return {
        ig: AccountRules(
            account_id=account.account_id,
            workspace_id=account.workspace_id,
            ig_user_id=ig,
            status=account.status,
            rules=tuple(rules[ig]),
        )
        for ig, account in accounts.items()
    }


async def load_active_rules(session: AsyncSession, account_id: int) -> list[CampaignRule]:
    """The active campaigns of one account (the dashboard's "Try a comment")."""
    statement = (
        select(*_RULE_COLUMNS)
        .where(Campaign.account_id == account_id, Campaign.status == CampaignStatus.ACTIVE)
        .order_by(Campaign.id)
    )
    return [CampaignRule.from_mapping(row) for row in (await session.execute(statement)).mappings()]
