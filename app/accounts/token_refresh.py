"""Refreshing long-lived access tokens: daily for those about to expire, and on a 190 answer.

Meta refreshes a long-lived token only once it is at least 24 hours old and not yet expired;
the refreshed token lives another 60 days. The new token replaces the old one
with a conditional UPDATE on the old ciphertext, so a reconnect or another worker's refresh in
the meantime is never overwritten. A failed refresh is an operational event.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.accounts.tokens import MissingTokenError, open_access_token, seal_access_token
from app.crypto import TokenCipher, TokenDecryptError
from app.db.models import AccountStatus, EventLevel, InstagramAccount
from app.instagram.graph import GraphClient, GraphError
from app.operations.events import record_event

logger = logging.getLogger("oncereply.tokens")

MIN_TOKEN_AGE = timedelta(hours=24)
REFRESH_WITHIN = timedelta(days=10)
DEFAULT_LIFETIME_S = 60 * 24 * 3600


class RefreshStatus(StrEnum):
    REFRESHED = "refreshed"
    REPLACED = "replaced"  # the token changed under us (reconnect, another refresh): use it
    TOO_YOUNG = "too_young"  # under 24 h old: Meta would refuse
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class RefreshResult:
    status: RefreshStatus
    detail: str = ""


async def refresh_token(
    session: AsyncSession,
    cipher: TokenCipher,
    graph: GraphClient,
    account_id: int,
    *,
    expected_ciphertext: bytes | None = None,
    now: datetime | None = None,
) -> RefreshResult:
    """Refresh one account's token; `expected_ciphertext` is the token a caller saw fail.

    Writes nothing on failure: the caller decides what a failure means (an alert from the
    daily cron, `needs_reauth` after a 190).
    """
    now = now or datetime.now(UTC)
    account = await session.get(InstagramAccount, account_id)
    if account is None or account.token_ciphertext is None:
        return RefreshResult(RefreshStatus.FAILED, "the account has no token")
    current = bytes(account.token_ciphertext)
    if expected_ciphertext is not None and current != expected_ciphertext:
        return RefreshResult(RefreshStatus.REPLACED)
    if account.token_issued_at is not None and now - account.token_issued_at < MIN_TOKEN_AGE:
        return RefreshResult(RefreshStatus.TOO_YOUNG, "the token is less than 24 hours old")
    try:
        old_token = open_access_token(cipher, account)
        answer = await graph.refresh_long_lived_token(old_token)
    except (MissingTokenError, TokenDecryptError, GraphError, ValueError) as exc:
        return RefreshResult(RefreshStatus.FAILED, str(exc)[:300])
    new_token = answer.get("access_token")
    if not isinstance(new_token, str) or not new_token:
        return RefreshResult(RefreshStatus.FAILED, "Meta's answer had no access_token")
    lifetime = answer.get("expires_in")
    seconds = int(lifetime) if isinstance(lifetime, int | float) else DEFAULT_LIFETIME_S
    sealed = InstagramAccount(ig_user_id=account.ig_user_id)
    seal_access_token(cipher, sealed, new_token)
    result = await session.execute(
        update(InstagramAccount)
        .where(InstagramAccount.id == account_id, InstagramAccount.token_ciphertext == current)
        .values(
            token_ciphertext=sealed.token_ciphertext,
            token_key_id=sealed.token_key_id,
            token_issued_at=now,
            token_expires_at=now + timedelta(seconds=seconds),
        )
        .returning(InstagramAccount.id)
        .execution_options(synchronize_session=False)
    )
    if result.first() is None:
        return RefreshResult(RefreshStatus.REPLACED)
    return RefreshResult(RefreshStatus.REFRESHED)


async def refresh_expiring_tokens(
    session: AsyncSession, cipher: TokenCipher, graph: GraphClient, *, now: datetime | None = None
) -> dict[str, int]:
    """The daily cron: refresh every token at least 24 h old that expires within 10 days."""
    now = now or datetime.now(UTC)
    rows = (
        await session.execute(
            select(InstagramAccount.id, InstagramAccount.workspace_id).where(
                InstagramAccount.status != AccountStatus.DISCONNECTED,
                InstagramAccount.token_ciphertext.is_not(None),
                InstagramAccount.token_expires_at.is_not(None),
                InstagramAccount.token_expires_at > now,
                InstagramAccount.token_expires_at <= now + REFRESH_WITHIN,
                (InstagramAccount.token_issued_at.is_(None))
                | (InstagramAccount.token_issued_at <= now - MIN_TOKEN_AGE),
            )
        )
    ).all()
    counts = {"refreshed": 0, "failed": 0}
    for account_id, workspace_id in rows:
        result = await refresh_token(session, cipher, graph, account_id, now=now)
        if result.status is RefreshStatus.FAILED:
            counts["failed"] += 1
            await record_event(
                session,
                source="token_refresh",
                level=EventLevel.WARNING,
                kind="token_refresh_failed",
                message=f"Could not refresh the Instagram token: {result.detail}",
                workspace_id=workspace_id,
                account_id=account_id,
            )
        elif result.status is RefreshStatus.REFRESHED:
            counts["refreshed"] += 1
        await session.commit()
    if counts["refreshed"] or counts["failed"]:
        logger.info("token refresh: %(refreshed)d refreshed, %(failed)d failed", counts)
    return counts
