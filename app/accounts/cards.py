"""Reading a workspace's connected accounts for the dashboard: status, token, webhooks.

`AccountCard` turns the stored columns into what a creator needs to see: whether the account
works, how long its token has left, whether Instagram sends its webhooks, and why it is
paused if it is. Always filtered by workspace, so another workspace's account is "not found".
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.bounds import id_in_range
from app.db.models import AccountStatus, Campaign, CampaignStatus, InstagramAccount

# The daily refresh renews tokens that expire within 10 days; past that, warn the creator.
TOKEN_WARNING = timedelta(days=10)
# An account's status as every screen says it: what the creator has to do, not our column.
STATUS_WORDS = {
    AccountStatus.ACTIVE.value: "Active",
    AccountStatus.NEEDS_REAUTH.value: "Reconnect needed",
    AccountStatus.PAUSED.value: "Paused",
    AccountStatus.DISCONNECTED.value: "Disconnected",
}


@dataclass(frozen=True, slots=True)
class AccountCard:
    id: int
    ig_user_id: str
    username: str
    name: str | None
    account_type: str | None
    status: AccountStatus
    status_reason: str | None
    paused_until: datetime | None
    token_expires_at: datetime | None
    webhook_subscribed_at: datetime | None
    webhook_fields: list[str]
    connected_at: datetime
    active_campaigns: int
    campaigns: int

    def token_state(self, now: datetime | None = None) -> str:
        """`ok`, `soon` (within 10 days), `expired` or `none` (no token stored)."""
        if self.token_expires_at is None:
            return "none"
        left = self.token_expires_at - (now or datetime.now(UTC))
        if left <= timedelta(0):
            return "expired"
        return "soon" if left <= TOKEN_WARNING else "ok"

    def status_words(self, now: datetime | None = None) -> str:
        """`effective_status` in the words of `STATUS_WORDS`."""
        status = self.effective_status(now)
        return STATUS_WORDS.get(status, status.replace("_", " ").capitalize())

    def token_countdown(self, now: datetime | None = None) -> str:
        if self.token_expires_at is None:
            return "no token"
        seconds = int((self.token_expires_at - (now or datetime.now(UTC))).total_seconds())
        if seconds <= 0:
            return "expired"
        days, rest = divmod(seconds, 86_400)
        hours = rest // 3_600
        if days >= 2:
            return f"expires in {days} days"
        if days == 1:
            return f"expires in 1 day {hours} h"
        if hours >= 1:
            return f"expires in {hours} h"
        return f"expires in {max(1, rest // 60)} min"

    def effective_status(self, now: datetime | None = None) -> str:
        """What the card shows: the stored status, or `needs_reauth` once the token expired."""
        if self.status is AccountStatus.ACTIVE and self.token_state(now) in {"expired", "none"}:
            return AccountStatus.NEEDS_REAUTH.value
        return self.status.value

    @property
    def webhooks_ok(self) -> bool:
        return self.webhook_subscribed_at is not None


def _card_query(workspace_id: int):  # type: ignore[no-untyped-def]
    active = func.count(Campaign.id).filter(Campaign.status == CampaignStatus.ACTIVE)
    return (
        select(
            InstagramAccount,
            active,
            func.count(Campaign.id).filter(Campaign.status != CampaignStatus.ARCHIVED),
        )
        .outerjoin(Campaign, Campaign.account_id == InstagramAccount.id)
        .where(InstagramAccount.workspace_id == workspace_id)
        .group_by(InstagramAccount.id)
    )


def _card(account: InstagramAccount, active: int, total: int) -> AccountCard:
    return AccountCard(
        id=account.id,
        ig_user_id=account.ig_user_id,
        username=account.username,
        name=account.name,
        account_type=account.account_type,
        status=account.status,
        status_reason=account.status_reason,
        paused_until=account.paused_until,
        token_expires_at=account.token_expires_at,
        webhook_subscribed_at=account.webhook_subscribed_at,
        webhook_fields=list(account.webhook_fields or []),
        connected_at=account.connected_at,
        active_campaigns=active,
        campaigns=total,
    )


async def list_accounts(session: AsyncSession, workspace_id: int) -> list[AccountCard]:
    rows = await session.execute(
        _card_query(workspace_id).order_by(
            InstagramAccount.status == AccountStatus.DISCONNECTED, InstagramAccount.username
        )
    )
    return [_card(account, active, total) for account, active, total in rows.all()]


async def list_usable_accounts(session: AsyncSession, workspace_id: int) -> list[AccountCard]:
    """The accounts a campaign can be made for or tried on: all but disconnected ones."""
    return [
        account
        for account in await list_accounts(session, workspace_id)
        if account.status is not AccountStatus.DISCONNECTED
    ]


async def get_account_card(
    session: AsyncSession, workspace_id: int, account_id: int
) -> AccountCard | None:
    if not id_in_range(account_id):
        return None  # an id past `bigint` (from a query string): no row has it
    row = (
        await session.execute(_card_query(workspace_id).where(InstagramAccount.id == account_id))
    ).one_or_none()
    return _card(*row) if row else None


async def get_account(
    session: AsyncSession, workspace_id: int, account_id: int
) -> InstagramAccount | None:
    if not id_in_range(account_id):
        return None  # an id past `bigint` (from a query string): no row has it
    return (
        await session.execute(
            select(InstagramAccount).where(
                InstagramAccount.id == account_id, InstagramAccount.workspace_id == workspace_id
            )
        )
    ).scalar_one_or_none()
