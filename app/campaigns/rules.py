"""Loading campaigns as `CampaignRule`s for matching: one query however many accounts.

Ingest resolves a batch's accounts (by their Instagram id, the webhook `entry.id`) and their
active campaigns together with one outer join, comment campaigns as `rules` and story-reply
and story-mention ones as `story_rules` (`app.campaigns.story_matching`); reconciliation
loads one account's active comment rules (`load_active_rules`), and the dashboard's "Try a
comment" every comment campaign of one account but the archived ones (`load_rules_to_try`),
or a rule is built from any campaign with `CampaignRule.from_model`.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.campaigns.matching import RULE_COLUMNS, CampaignRule
from app.campaigns.story_matching import STORY_COLUMNS, StoryRule
from app.db.models import AccountStatus, Campaign, CampaignStatus, CampaignTrigger
from app.db.raw import Db, fetch_dicts

_RULE_COLUMNS = tuple(getattr(Campaign, name) for name in RULE_COLUMNS)


@dataclass(frozen=True, slots=True)
class AccountRules:
    """A connected account and its active campaigns."""

    account_id: int
    workspace_id: int
    ig_user_id: str
    status: AccountStatus
    rules: tuple[CampaignRule, ...]  # comment campaigns (and their DM keyword triggers)
    # The account's private replies wait for its pacer (a backlog): ingestion leaves new
    # comments to it instead of giving each a job.
    paced: bool = False
    story_rules: tuple[StoryRule, ...] = ()  # story-reply and story-mention campaigns


# One round trip for every account of a batch and its active campaigns. Plain SQL on a
# psycopg connection (`app.db.raw`): through the ORM it cost ~2 ms of CPU per ingest job.
_ACCOUNTS_WITH_RULES = (
    "SELECT a.id AS acc_id, a.workspace_id AS acc_workspace_id, a.ig_user_id, "  # noqa: S608 - constants
    "a.status AS acc_status, a.pr_backlog_since IS NOT NULL AS acc_paced, "
    + ", ".join(f"c.{name}" for name in (*RULE_COLUMNS, *STORY_COLUMNS))
    + " FROM instagram_accounts AS a LEFT JOIN campaigns AS c"
    " ON c.account_id = a.id AND c.status = 'active'"
    " WHERE a.ig_user_id = ANY(CAST(%(ids)s AS varchar[])) ORDER BY a.id, c.id"
)


async def load_account_rules(db: Db, ig_user_ids: Collection[str]) -> dict[str, AccountRules]:
    """Accounts with these Instagram ids (missing ones are absent) and their active rules."""
    if not ig_user_ids:
        return {}
    found: dict[str, tuple[dict[str, Any], list[CampaignRule], list[StoryRule]]] = {}
    for row in await fetch_dicts(db, _ACCOUNTS_WITH_RULES, {"ids": list(ig_user_ids)}):
        _, rules, story_rules = found.setdefault(row["ig_user_id"], (row, [], []))
        if row["id"] is None:
            continue
        if row["trigger"] == CampaignTrigger.COMMENTS:
            rules.append(CampaignRule.from_mapping(row))
        else:
            story_rules.append(StoryRule.from_mapping(row))
    return {
        ig: AccountRules(
            account_id=account["acc_id"],
            workspace_id=account["acc_workspace_id"],
            ig_user_id=ig,
            status=AccountStatus(account["acc_status"]),
            rules=tuple(rules),
            paced=bool(account["acc_paced"]),
            story_rules=tuple(story_rules),
        )
        for ig, (account, rules, story_rules) in found.items()
    }


async def load_active_rules(session: AsyncSession, account_id: int) -> list[CampaignRule]:
    """The active comment campaigns of one account."""
    statement = (
        select(*_RULE_COLUMNS)
        .where(
            Campaign.account_id == account_id,
            Campaign.status == CampaignStatus.ACTIVE,
            Campaign.trigger == CampaignTrigger.COMMENTS,
        )
        .order_by(Campaign.id)
    )
    return [CampaignRule.from_mapping(row) for row in (await session.execute(statement)).mappings()]


async def load_rules_to_try(
    session: AsyncSession, workspace_id: int, account_id: int
) -> list[CampaignRule]:
    """Every comment campaign of one account of the workspace but the archived ones: "Try a
    comment" shows drafts and paused campaigns too, with why they would not answer."""
    statement = (
        select(*_RULE_COLUMNS)
        .where(
            Campaign.workspace_id == workspace_id,
            Campaign.account_id == account_id,
            Campaign.status != CampaignStatus.ARCHIVED,
            Campaign.trigger == CampaignTrigger.COMMENTS,
        )
        .order_by(Campaign.id)
    )
    return [CampaignRule.from_mapping(row) for row in (await session.execute(statement)).mappings()]
