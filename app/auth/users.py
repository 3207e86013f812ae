"""Users: the email and password rules, creating a user, changing a password.

Sign-up, invite sign-up and the CLI create users here; a workspace for a new user is
`app.workspaces.service`'s part.
"""

from __future__ import annotations

from sqlalchemy import select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.passwords import MAX_PASSWORD_LENGTH, MIN_PASSWORD_LENGTH, hash_off_loop
from app.db.models import User


class UserExistsError(Exception):
    """An account with that email already exists."""


class InvalidUserError(ValueError):
    """The email or password does not meet the rules; the message says which."""


def normalize_email(email: str) -> str:
    return email.strip().lower()


def validate_email(email: str) -> None:
    local, _, domain = email.partition("@")
    if not local or "." not in domain or " " in email or len(email) > 320:
        raise InvalidUserError("Enter a valid email address.")


def validate_credentials(email: str, password: str) -> None:
    validate_email(email)
    if len(password) < MIN_PASSWORD_LENGTH:
        raise InvalidUserError(f"Use at least {MIN_PASSWORD_LENGTH} characters for the password.")
    if len(password) > MAX_PASSWORD_LENGTH:
        raise InvalidUserError(f"Use at most {MAX_PASSWORD_LENGTH} characters for the password.")


async def create_user(session: AsyncSession, *, email: str, password: str) -> int:
    """Create a user without a workspace (an invite brings them into one), in the caller's
    transaction; `UserExistsError` when the email is taken."""
    email = normalize_email(email)
    validate_credentials(email, password)
    # The unique key decides, not a prior lookup: two sign-ups racing for one email get one user.
    user_id = await session.scalar(
        insert(User)
        .values(email=email, password_hash=await hash_off_loop(password))
        .on_conflict_do_nothing(index_elements=[User.email])
        .returning(User.id)
    )
    if user_id is None:
        raise UserExistsError(email)
    return user_id


async def set_password(session: AsyncSession, *, email: str, password: str) -> bool:
    """Give the user with `email` a new password, in the caller's transaction; False when
    there is no such user."""
    email = normalize_email(email)
    validate_credentials(email, password)
    user_id = await session.scalar(
        update(User)
        .where(User.email == email)
        .values(password_hash=await hash_off_loop(password))
        .returning(User.id)
    )
    return user_id is not None


async def find_user_by_email(session: AsyncSession, email: str) -> User | None:
    result = await session.execute(select(User).where(User.email == normalize_email(email)))
    return result.scalar_one_or_none()
