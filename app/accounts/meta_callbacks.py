"""What Meta's app-level callbacks do: deauthorize and data deletion.

Both arrive as a verified `signed_request` (`app.instagram.signed_request`) naming an
Instagram user id; Meta's documents use it for the person who used Instagram Login, and it may
be either the professional account id or the app-scoped id, so both are matched. Both are
idempotent: Meta repeats a callback it did not see answered, and a repeat changes nothing.

- Deauthorize (the creator removed the app in Instagram's settings): the token is deleted, the
  account marked disconnected and its active campaigns paused, in one transaction, and one
  event is recorded; a repeat finds the account already disconnected and does nothing.
- Data deletion: every connected account with that id is deleted with everything under it
  (campaigns, comments, deliveries, messages, events; the foreign keys cascade), and where the
  id is a fan's, the username and text of their comments, messages and deliveries are wiped.
  The request is recorded under a confirmation code for the status page; the same request
  repeated gets the same code.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import CursorResult, delete, func, or_, select, text, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import (
    AccountStatus,
    Campaign,
    CampaignStatus,
    DataDeletionRequest,
    EventLevel,
    InstagramAccount,
)
from app.instagram.signed_request import SignedRequest
from app.operations.events import record_event

DEAUTHORIZED_REASON = "Removed from Instagram's settings (Apps and websites)"
STATUS_PATH = "/meta/data-deletion/"

_WIPE_COMMENTS = text(
    "UPDATE comments SET text = '', commenter_username = NULL, decision = NULL "
    "WHERE commenter_id = :uid AND (text <> '' OR commenter_username IS NOT NULL)"
)
_WIPE_MESSAGES = text(
    "UPDATE messaging_events SET text = NULL, payload = NULL, details = NULL "
    "WHERE user_id = :uid AND (text IS NOT NULL OR payload IS NOT NULL OR details IS NOT NULL)"
)
_WIPE_DELIVERIES = text(
    "UPDATE dm_logs SET recipient_username = NULL, trigger_text = NULL "
    "WHERE recipient_id = :uid AND (recipient_username IS NOT NULL OR trigger_text IS NOT NULL)"
)


async def deauthorize(session: AsyncSession, request: SignedRequest) -> list[int]:
    """Disconnect the accounts this user removed the app from (the caller commits); the ids of
    the accounts that changed, empty on a repeat or for an unknown user."""
    uid = request.user_id
    rows = (
        await session.execute(
            update(InstagramAccount)
            .where(
                or_(InstagramAccount.ig_user_id == uid, InstagramAccount.app_scoped_id == uid),
                InstagramAccount.status != AccountStatus.DISCONNECTED,
            )
            .values(
                status=AccountStatus.DISCONNECTED,
                status_reason=DEAUTHORIZED_REASON,
                token_ciphertext=None,
                token_key_id=None,
                token_expires_at=None,
                webhook_subscribed_at=None,
                webhook_fields=None,
                paused_until=None,
                updated_at=func.now(),
            )
            .returning(
                InstagramAccount.id, InstagramAccount.workspace_id, InstagramAccount.username
            )
        )
    ).all()
    for account_id, workspace_id, username in rows:
        paused = await session.execute(
            update(Campaign)
            .where(Campaign.account_id == account_id, Campaign.status == CampaignStatus.ACTIVE)
            .values(status=CampaignStatus.PAUSED, updated_at=func.now())
        )
        await record_event(
            session,
            source="web",
            level=EventLevel.WARNING,
            kind="account_deauthorized",
            message=(
                f"@{username} removed OnceReply in Instagram's settings: its token is deleted "
                f"and {_count(paused)} active campaign(s) paused. Connect it again to resume."
            ),
            workspace_id=workspace_id,
            account_id=account_id,
        )
    return [row[0] for row in rows]


@dataclass(frozen=True, slots=True)
class DeletionReceipt:
    confirmation_code: str
    accounts_deleted: int
    comments_anonymised: int
    messages_anonymised: int
    deliveries_anonymised: int
    requested_at: datetime
    completed_at: datetime


async def delete_user_data(session: AsyncSession, request: SignedRequest) -> DeletionReceipt:
    """Delete or anonymise this Instagram user's data and record the request (the caller
    commits); a repeated request answers the first one's receipt."""
    uid = request.user_id
    accounts = await session.execute(
        delete(InstagramAccount).where(
            or_(InstagramAccount.ig_user_id == uid, InstagramAccount.app_scoped_id == uid)
        )
    )
    comments = await session.execute(_WIPE_COMMENTS, {"uid": uid})
    messages = await session.execute(_WIPE_MESSAGES, {"uid": uid})
    deliveries = await session.execute(_WIPE_DELIVERIES, {"uid": uid})
    statement = insert(DataDeletionRequest).values(
        confirmation_code=secrets.token_hex(10),
        instagram_user_id=uid,
        issued_at=request.issued_at or 0,
        accounts_deleted=_count(accounts),
        comments_anonymised=_count(comments),
        messages_anonymised=_count(messages),
        deliveries_anonymised=_count(deliveries),
        completed_at=func.now(),
    )
    # A repeat keeps the first receipt: the no-op update only makes RETURNING answer.
    upsert = statement.on_conflict_do_update(
        index_elements=["instagram_user_id", "issued_at"],
        set_={"instagram_user_id": statement.excluded.instagram_user_id},
    ).returning(DataDeletionRequest)
    row = (await session.scalars(upsert)).one()
    return _receipt(row)


async def deletion_receipt(session: AsyncSession, code: str) -> DeletionReceipt | None:
    row = await session.scalar(
        select(DataDeletionRequest).where(DataDeletionRequest.confirmation_code == code)
    )
    return _receipt(row) if row else None


def status_url(public_base_url: str, code: str) -> str:
    return f"{public_base_url}{STATUS_PATH}{code}"


def _receipt(row: DataDeletionRequest) -> DeletionReceipt:
    return DeletionReceipt(
        confirmation_code=row.confirmation_code,
        accounts_deleted=row.accounts_deleted,
        comments_anonymised=row.comments_anonymised,
        messages_anonymised=row.messages_anonymised,
        deliveries_anonymised=row.deliveries_anonymised,
        requested_at=row.requested_at,
        completed_at=row.completed_at,
    )


def _count(result: object) -> int:
    return result.rowcount if isinstance(result, CursorResult) else 0
