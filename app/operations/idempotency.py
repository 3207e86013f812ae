"""Idempotency keys: the first use of a key does the work, repeats get the first answer.

Every state-changing form and button carries a key rendered into the page. A request
*claims* its key with one `INSERT … ON CONFLICT DO NOTHING`, committed on its own so that a
concurrent request with the same key sees it. Then the work and the stored answer commit
together in one transaction: a repeat never finds an answer without the effect, nor the
effect without an answer. The states of a key:

- new → claimed (`processing`), the request runs;
- `processing` → a concurrent repeat is told "already in progress";
- `succeeded` → a repeat gets the stored answer (e.g. `{"status": 303, "location": …}`);
- `failed_retryable` (the work raised or was refused) → the same key may run again;
- the same key with a different request fingerprint → refused (`Mismatch`);
- past `expires_at` a key counts as unused (the retention job deletes it later).

`run_once` ties it together for callers in the web process (dashboard buttons, API, the
delivery log's retry). The action it runs must not commit; it returns `Finished(response)` to
commit its effect with the answer, or `Refused(anything)` to roll back and free the key.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Generic, TypeVar

from sqlalchemy import func, or_, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.db.models import IdempotencyKey, IdempotencyStatus
from app.operations.idempotency_hits import count_button_repeat

DEFAULT_TTL = timedelta(hours=24)
# How long a key can answer a repeat, per scope; a page left open longer gets a fresh key
# on reload anyway.
SCOPE_TTLS: dict[str, timedelta] = {
    "delivery.retry": timedelta(days=7),
}
MAX_KEY_LENGTH = 128

T = TypeVar("T")


def ttl_for(scope: str) -> timedelta:
    return SCOPE_TTLS.get(scope, DEFAULT_TTL)


def fingerprint_of(*parts: Any) -> str:
    """A stable hash of what was asked (JSON-able parts), to tell a true repeat from misuse."""
    canonical = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class KeyRequest:
    scope: str
    key: str
    fingerprint: str
    user_id: int | None = None
    workspace_id: int | None = None


@dataclass(frozen=True, slots=True)
class Claimed:
    key_id: int


@dataclass(frozen=True, slots=True)
class Replay:
    response: dict[str, Any]


@dataclass(frozen=True, slots=True)
class InProgress:
    pass


@dataclass(frozen=True, slots=True)
class Mismatch:
    pass


ClaimResult = Claimed | Replay | InProgress | Mismatch


@dataclass(frozen=True, slots=True)
class Finished:
    """The action changed something; commit it together with this answer."""

    response: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Refused(Generic[T]):
    """The action changed nothing (bad input, not found); roll back and free the key."""

    payload: T


@dataclass(frozen=True, slots=True)
class Ran:
    """The action ran now (not a repeat) and this is its stored answer."""

    response: dict[str, Any]


async def claim_key(session: AsyncSession, request: KeyRequest) -> ClaimResult:
    """Claim `request.key` or report why not. The caller must commit straight away."""
    expires_at = func.now() + ttl_for(request.scope)
    for _ in range(3):
        key_id = await session.scalar(
            insert(IdempotencyKey)
            .values(
                scope=request.scope,
                key=request.key,
                fingerprint=request.fingerprint,
                user_id=request.user_id,
                workspace_id=request.workspace_id,
                status=IdempotencyStatus.PROCESSING,
                expires_at=expires_at,
            )
            .on_conflict_do_nothing(index_elements=[IdempotencyKey.scope, IdempotencyKey.key])
            .returning(IdempotencyKey.id)
        )
        if key_id is not None:
            return Claimed(key_id)
        row = (
            await session.execute(
                select(
                    IdempotencyKey.id,
                    IdempotencyKey.fingerprint,
                    IdempotencyKey.status,
                    IdempotencyKey.response,
                    IdempotencyKey.expires_at < func.now(),
                ).where(IdempotencyKey.scope == request.scope, IdempotencyKey.key == request.key)
            )
        ).one_or_none()
        if row is None:
            continue  # deleted by retention in between: insert again
        existing_id, fingerprint, status, response, expired = row
        if not expired:
            if fingerprint != request.fingerprint:
                return Mismatch()
            if status is IdempotencyStatus.SUCCEEDED:
                return Replay(response or {})
            if status is IdempotencyStatus.PROCESSING:
                return InProgress()
        # A failed or expired key may be taken again, by exactly one of the requests racing.
        reclaimed = await session.scalar(
            update(IdempotencyKey)
            .where(
                IdempotencyKey.id == existing_id,
                or_(
                    IdempotencyKey.status == IdempotencyStatus.FAILED_RETRYABLE,
                    IdempotencyKey.expires_at < func.now(),
                ),
            )
            .values(
                status=IdempotencyStatus.PROCESSING,
                fingerprint=request.fingerprint,
                user_id=request.user_id,
                workspace_id=request.workspace_id,
                response=None,
                finished_at=None,
                expires_at=expires_at,
            )
            .returning(IdempotencyKey.id)
        )
        if reclaimed is not None:
            return Claimed(reclaimed)
    return InProgress()


async def finish_key(session: AsyncSession, key_id: int, response: dict[str, Any]) -> bool:
    """Record the answer, in the same transaction as the effect it describes."""
    done = await session.scalar(
        update(IdempotencyKey)
        .where(IdempotencyKey.id == key_id, IdempotencyKey.status == IdempotencyStatus.PROCESSING)
        .values(status=IdempotencyStatus.SUCCEEDED, response=response, finished_at=func.now())
        .returning(IdempotencyKey.id)
    )
    return done is not None


async def free_key(session: AsyncSession, key_id: int) -> None:
    """The claimed work did not happen; let the same key try again."""
    await session.execute(
        update(IdempotencyKey)
        .where(IdempotencyKey.id == key_id, IdempotencyKey.status == IdempotencyStatus.PROCESSING)
        .values(status=IdempotencyStatus.FAILED_RETRYABLE, finished_at=func.now())
    )


async def run_once(
    sessionmaker: async_sessionmaker[AsyncSession],
    request: KeyRequest,
    action: Callable[[AsyncSession], Awaitable[Finished | Refused[T]]],
    *,
    settle_s: float = 2.0,
    poll_s: float = 0.05,
) -> Ran | Replay | InProgress | Mismatch | Refused[T]:
    """Run `action` at most once per key.

    A repeat that arrives while the first is still running waits up to `settle_s` for its
    answer (a double-click then lands where the first click went) before it is told
    `InProgress`.
    """
    deadline = time.monotonic() + settle_s
    while True:
        async with sessionmaker() as session, session.begin():
            claim = await claim_key(session, request)
        if isinstance(claim, InProgress) and time.monotonic() < deadline:
            await asyncio.sleep(poll_s)
            continue
        break
    if not isinstance(claim, Claimed):
        if isinstance(claim, Replay | InProgress):
            await count_button_repeat(
                sessionmaker, workspace_id=request.workspace_id, scope=request.scope
            )
        return claim

    try:
        async with sessionmaker() as session:
            outcome = await action(session)
            if isinstance(outcome, Finished):
                recorded = await finish_key(session, claim.key_id, outcome.response)
                await (session.commit() if recorded else session.rollback())
            else:
                await session.rollback()
    except BaseException:
        # Shielded: even a cancelled request must not leave its key stuck "in progress".
        await asyncio.shield(_free(sessionmaker, claim.key_id))
        raise
    if isinstance(outcome, Refused):
        await _free(sessionmaker, claim.key_id)
        return outcome
    if not recorded:
        # Only a key freed meanwhile by hand could get here; nothing of the action was kept.
        return InProgress()
    return Ran(outcome.response)


async def _free(sessionmaker: async_sessionmaker[AsyncSession], key_id: int) -> None:
    async with sessionmaker() as session, session.begin():
        await free_key(session, key_id)
