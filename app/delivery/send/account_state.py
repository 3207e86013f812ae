"""What an answer about the whole account does: 368 pauses it, 190 refreshes or re-auths it.

Account states as delivery reads them:
- `active`: send.
- `paused` with `paused_until` set: paused automatically (Meta's 368 policy block). Work waits
  and resumes by itself once `paused_until` has passed.
- `paused` with no `paused_until`: paused by the creator; pending work is skipped
  (SKIPPED_ACCOUNT_PAUSED). The same for `disconnected`.
- `needs_reauth`: the token was refused and could not be refreshed; work waits until the
  creator reconnects (the due-work relay only picks up work of active accounts).

Each change is a conditional UPDATE from `active`, so when many jobs hit the same 368 or 190 at
once the account is paused (or flagged) once and one alert is raised.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from redis.exceptions import RedisError
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from app.accounts.token_refresh import RefreshStatus, refresh_token
from app.db.models import AccountStatus, EventLevel
from app.operations.events import record_event
from app.resources import Resources

logger = logging.getLogger("oncereply.delivery")

POLICY_PAUSE = timedelta(hours=6)
# While one worker refreshes an account's token, the others' work waits this long.
TOKEN_WAIT = timedelta(seconds=30)
_REFRESH_LOCK = "oncereply:token-refresh:{account_id}"


class Gate(StrEnum):
    """What the account's state means for pending work."""

    SEND = "send"
    WAIT = "wait"
    SKIP = "skip"


def gate_for(status: str, paused_until: datetime | None, now: datetime) -> Gate:
    if status == AccountStatus.ACTIVE:
        return Gate.SEND
    if status == AccountStatus.PAUSED and paused_until is not None:
        return Gate.SEND if paused_until <= now else Gate.WAIT
    if status == AccountStatus.NEEDS_REAUTH:
        return Gate.WAIT
    return Gate.SKIP


_PAUSE = text(
    """
UPDATE instagram_accounts SET status = 'paused', paused_until = :until, status_reason = :reason,
    updated_at = now()
WHERE id = :id AND status = 'active'
RETURNING workspace_id
"""
)
_RESUME = text(
    """
UPDATE instagram_accounts SET status = 'active', paused_until = NULL, status_reason = NULL,
    updated_at = now()
WHERE status = 'paused' AND paused_until IS NOT NULL AND paused_until <= now()
  AND (CAST(:id AS bigint) IS NULL OR id = :id)
RETURNING id
"""
)
_NEEDS_REAUTH = text(
    """
UPDATE instagram_accounts SET status = 'needs_reauth', status_reason = :reason,
    updated_at = now()
WHERE id = :id AND status IN ('active', 'paused')
RETURNING workspace_id
"""
)


async def pause_for_policy_block(
    resources: Resources, account_id: int, *, now: datetime | None = None, detail: str = ""
) -> datetime:
    """Pause the account after a 368; returns until when. Alerts once per pause."""
    until = (now or datetime.now(UTC)) + POLICY_PAUSE
    reason = "Instagram blocked sending for policy reasons (code 368); paused automatically"
    async with resources.sessionmaker() as session, session.begin():
        row = (
            await session.execute(_PAUSE, {"id": account_id, "until": until, "reason": reason})
        ).first()
        if row is not None:
            await record_event(
                session,
                source="worker",
                level=EventLevel.ERROR,
                kind="account_paused",
                message=f"{reason} until {until:%Y-%m-%d %H:%M} UTC. {detail}".strip(),
                workspace_id=row.workspace_id,
                account_id=account_id,
                details={"paused_until": until.isoformat(), "code": 368},
            )
    return until


async def resume_expired_pauses(conn: AsyncConnection, account_id: int | None = None) -> int:
    """Reactivate accounts whose automatic pause has run out."""
    return len((await conn.execute(_RESUME, {"id": account_id})).all())


class TokenOutcome(StrEnum):
    RETRY = "retry"  # a fresh token is in place
    WAIT = "wait"  # another worker is refreshing; try again shortly
    REAUTH = "reauth"  # the creator must reconnect


async def handle_token_refused(
    resources: Resources, account_id: int, used_ciphertext: bytes | None
) -> TokenOutcome:
    """After a 190: one refresh attempt per failing token, else `needs_reauth` and an alert."""
    lock = _REFRESH_LOCK.format(account_id=account_id)
    try:
        if not await resources.redis.set(lock, b"1", nx=True, ex=60):
            return TokenOutcome.WAIT
    except RedisError:
        return TokenOutcome.WAIT
    try:
        async with resources.sessionmaker() as session, session.begin():
            result = await refresh_token(
                session,
                resources.cipher,
                resources.graph,
                account_id,
                expected_ciphertext=used_ciphertext,
            )
            if result.status in (RefreshStatus.REFRESHED, RefreshStatus.REPLACED):
                return TokenOutcome.RETRY
            why = result.detail or result.status.value
            reason = (
                f"Instagram refused the access token and it could not be refreshed ({why}); "
                "reconnect the account"
            )
            row = (
                await session.execute(_NEEDS_REAUTH, {"id": account_id, "reason": reason})
            ).first()
            if row is not None:
                await record_event(
                    session,
                    source="worker",
                    level=EventLevel.ERROR,
                    kind="account_needs_reauth",
                    message=reason,
                    workspace_id=row.workspace_id,
                    account_id=account_id,
                )
            return TokenOutcome.REAUTH
    finally:
        try:
            await resources.redis.delete(lock)
        except RedisError:
            logger.warning("could not release the token refresh lock of account %s", account_id)
