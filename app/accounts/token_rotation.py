"""Re-sealing stored access tokens under the current encryption key (`python -m app rotate-tokens`).

Rotation is: deploy `ENCRYPTION_KEY=<new>` with the old key in `ENCRYPTION_OLD_KEYS` to every
process, run this, and drop the old key once it reports none left. Rows are re-sealed one by
one, each with a single UPDATE conditional on the ciphertext that was read: a token that a
refresh or a reconnect replaced in the meantime was written by that process (under its key)
and is left as it is, never overwritten with the older token. Plaintext tokens stay in memory.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from sqlalchemy import ColumnElement, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.accounts.tokens import MissingTokenError, open_access_token, seal_access_token
from app.crypto import TokenCipher, TokenDecryptError
from app.db.models import InstagramAccount

BATCH = 200


class ResealOutcome(StrEnum):
    RESEALED = "resealed"
    CHANGED = "changed"  # replaced (or removed) between our read and our write: left alone
    UNREADABLE = "unreadable"  # its key is not configured, or the bytes do not open


@dataclass(frozen=True, slots=True)
class StoredToken:
    account_id: int
    ig_user_id: str
    ciphertext: bytes
    key_id: str | None


@dataclass(slots=True)
class RotationReport:
    key_id: str
    already_current: int = 0
    resealed: int = 0
    changed: int = 0
    unreadable_accounts: list[int] = field(default_factory=list)
    # Tokens still not under the current key once the run is over: one that changed under us
    # was written by a process still on the old key (a re-run after the deploy fixes it); an
    # unreadable one needs its key back in ENCRYPTION_OLD_KEYS, or a reconnect.
    remaining: int = 0


async def reseal_token(
    session: AsyncSession, cipher: TokenCipher, stored: StoredToken
) -> ResealOutcome:
    """Re-encrypt one token under the current key, unless its row changed since it was read."""
    probe = InstagramAccount(
        ig_user_id=stored.ig_user_id,
        token_ciphertext=stored.ciphertext,
        token_key_id=stored.key_id,
    )
    try:
        plaintext = open_access_token(cipher, probe)
    except (TokenDecryptError, MissingTokenError):
        return ResealOutcome.UNREADABLE
    seal_access_token(cipher, probe, plaintext)
    result = await session.execute(
        update(InstagramAccount)
        .where(
            InstagramAccount.id == stored.account_id,
            InstagramAccount.token_ciphertext == stored.ciphertext,
        )
        .values(token_ciphertext=probe.token_ciphertext, token_key_id=probe.token_key_id)
        .returning(InstagramAccount.id)
        .execution_options(synchronize_session=False)
    )
    return ResealOutcome.RESEALED if result.first() is not None else ResealOutcome.CHANGED


async def rotate_tokens(
    sessionmaker: async_sessionmaker[AsyncSession], cipher: TokenCipher, *, batch: int = BATCH
) -> RotationReport:
    """Re-seal every token not under `cipher`'s current key; one short transaction per row."""
    current = cipher.current_key_id
    report = RotationReport(key_id=current)
    not_current = InstagramAccount.token_ciphertext.is_not(None) & (
        InstagramAccount.token_key_id.is_distinct_from(current)
    )
    is_current = InstagramAccount.token_ciphertext.is_not(None) & (
        InstagramAccount.token_key_id == current
    )
    report.already_current = await _count(sessionmaker, is_current)
    after = 0
    while True:
        async with sessionmaker() as session:
            rows = (
                await session.execute(
                    select(
                        InstagramAccount.id,
                        InstagramAccount.ig_user_id,
                        InstagramAccount.token_ciphertext,
                        InstagramAccount.token_key_id,
                    )
                    .where(not_current, InstagramAccount.id > after)
                    .order_by(InstagramAccount.id)
                    .limit(batch)
                )
            ).all()
        if not rows:
            break
        for account_id, ig_user_id, ciphertext, key_id in rows:
            stored = StoredToken(account_id, ig_user_id, bytes(ciphertext), key_id)
            # Committed row by row, so a row lock is never held while other rows are worked on.
            async with sessionmaker() as session, session.begin():
                outcome = await reseal_token(session, cipher, stored)
            if outcome is ResealOutcome.RESEALED:
                report.resealed += 1
            elif outcome is ResealOutcome.CHANGED:
                report.changed += 1
            else:
                report.unreadable_accounts.append(account_id)
        after = rows[-1][0]
    report.remaining = await _count(sessionmaker, not_current)
    return report


async def _count(
    sessionmaker: async_sessionmaker[AsyncSession], condition: ColumnElement[bool]
) -> int:
    async with sessionmaker() as session:
        counted = await session.scalar(
            select(func.count()).select_from(InstagramAccount).where(condition)
        )
    return counted or 0
