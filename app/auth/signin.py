"""Checking a sign-in and starting the session; the sign-in and sign-up pages call these.

A wrong email and a wrong password get the same answer in about the same time (an unknown
email is checked against a dummy hash), so the form does not reveal who has an account.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from litestar.connection import ASGIConnection
from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.current import SESSION_USER, SESSION_WORKSPACE
from app.auth.passwords import hash_off_loop, hash_password, needs_rehash, verify_off_loop
from app.auth.sessions import rotate_session
from app.auth.throttle import LoginThrottle
from app.auth.users import normalize_email
from app.db.models import User, WorkspaceMember

_DUMMY_HASH = hash_password("not-a-real-password-only-for-timing")
NO_WORKSPACE = "Your account no longer belongs to any workspace."


@dataclass(frozen=True, slots=True)
class SignedIn:
    user_id: int
    workspace_id: int


@dataclass(frozen=True, slots=True)
class SignInRefused:
    message: str
    status_code: int


async def check_sign_in(
    session: AsyncSession, throttle: LoginThrottle, *, email: str, password: str, address: str
) -> SignedIn | SignInRefused:
    """Verify the credentials under the throttle; the caller commits (last_login_at)."""
    user_id = await check_password(
        session, throttle, email=email, password=password, address=address
    )
    if isinstance(user_id, SignInRefused):
        return user_id
    workspace_id = await first_workspace(session, user_id)
    if workspace_id is None:
        return SignInRefused(NO_WORKSPACE, 403)
    return SignedIn(user_id=user_id, workspace_id=workspace_id)


async def first_workspace(session: AsyncSession, user_id: int) -> int | None:
    """The workspace sign-in opens: the user's oldest membership."""
    workspace_id: int | None = await session.scalar(
        select(WorkspaceMember.workspace_id)
        .where(WorkspaceMember.user_id == user_id)
        .order_by(WorkspaceMember.created_at, WorkspaceMember.workspace_id)
        .limit(1)
    )
    return workspace_id


async def check_password(
    session: AsyncSession, throttle: LoginThrottle, *, email: str, password: str, address: str
) -> int | SignInRefused:
    """The user id when the password is right, under the throttle, whatever their workspaces
    (an invite link signs in someone who has none); the caller commits (last_login_at)."""
    email = normalize_email(email)
    decision = await throttle.attempt(email, address)
    if not decision.allowed:
        return SignInRefused(
            "Too many failed sign-in attempts. For your safety, signing in is paused for "
            f"{decision.retry_after_text}.",
            429,
        )
    if decision.delay_s:
        await asyncio.sleep(decision.delay_s)

    user = (await session.execute(select(User).where(User.email == email))).scalar_one_or_none()
    valid = await verify_off_loop(user.password_hash if user else _DUMMY_HASH, password)
    if user is None or not valid:
        await throttle.failed(email)  # for any email, so the answer takes the same time
        return SignInRefused("That email and password do not match.", 400)
    await throttle.succeeded(email, address)
    values: dict[str, Any] = {"last_login_at": func.now()}
    if needs_rehash(user.password_hash):
        values["password_hash"] = await hash_off_loop(password)
    await session.execute(update(User).where(User.id == user.id).values(**values))
    return user.id


def start_session(
    connection: ASGIConnection[Any, Any, Any, Any], user_id: int, workspace_id: int
) -> None:
    """Sign the browser in under a fresh session id (the old id, if any, stops working)."""
    rotate_session(
        connection,
        {SESSION_USER: user_id, SESSION_WORKSPACE: workspace_id, "at": int(time.time())},
    )
