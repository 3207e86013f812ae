"""One doctor visit: the server's checks and every connected account's, in that order; the
failures are remembered for a day so the overview can point at the doctor."""

from __future__ import annotations

import asyncio
import json

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import AccountStatus, InstagramAccount
from app.resources import Resources
from app.setup_doctor.accounts import check_account, quick_checks
from app.setup_doctor.report import DoctorReport
from app.setup_doctor.server import check_handshake, check_https, check_settings
from app.setup_doctor.traffic import load_traffic

_FAILURES_KEY = "oncereply:doctor:failures:"
FAILURES_TTL_S = 24 * 3600


async def run_doctor(
    resources: Resources, session: AsyncSession, workspace_id: int
) -> DoctorReport:
    settings = resources.settings
    handshake = asyncio.create_task(check_handshake(settings))
    accounts = (
        await session.scalars(
            select(InstagramAccount)
            .where(
                InstagramAccount.workspace_id == workspace_id,
                InstagramAccount.status != AccountStatus.DISCONNECTED,
            )
            .order_by(InstagramAccount.id)
        )
    ).all()
    reports = [await check_account(resources, session, account) for account in accounts]
    report = DoctorReport(
        server=[check_settings(settings), check_https(settings), await handshake],
        accounts=reports,
    )
    key = f"{_FAILURES_KEY}{workspace_id}"
    failures = report.failures()
    if failures:
        await resources.redis.set(key, json.dumps(failures), ex=FAILURES_TTL_S)
    else:
        await resources.redis.delete(key)
    return report


async def forget_failures(resources: Resources, workspace_id: int) -> None:
    """Forget the last visit's failures: an account just (re)connected, so what the doctor saw
    of its token, permissions and subscriptions is no longer true, and the overview must not
    keep pointing at it for a day. The next visit remembers afresh."""
    await resources.redis.delete(f"{_FAILURES_KEY}{workspace_id}")


async def remembered_failures(resources: Resources, workspace_id: int) -> list[str]:
    """What the last doctor visit found failing (within a day), for the overview."""
    raw = await resources.redis.get(f"{_FAILURES_KEY}{workspace_id}")
    try:
        found = json.loads(raw) if raw else []
    except ValueError:
        return []
    return [str(item) for item in found] if isinstance(found, list) else []


async def overview_failures(
    resources: Resources, session: AsyncSession, workspace_id: int
) -> list[str]:
    """The doctor's failures the overview can know without calling anyone: the last visit's,
    plus the checks that need only the settings and the database (run on every full load)."""
    found = await remembered_failures(resources, workspace_id)
    https = check_https(resources.settings)
    if https.failed:
        found.append(https.title)
    accounts = (
        await session.scalars(
            select(InstagramAccount).where(
                InstagramAccount.workspace_id == workspace_id,
                InstagramAccount.status != AccountStatus.DISCONNECTED,
            )
        )
    ).all()
    for account in accounts:
        for check in quick_checks(account, await load_traffic(session, account.id)):
            if check.failed:
                found.append(f"@{account.username}: {check.title}")
    return list(dict.fromkeys(found))
