"""`python -m app create-user`: a headless first run creates a user who owns a workspace."""

from __future__ import annotations

import subprocess

from sqlalchemy import text

from app.auth.passwords import verify_password
from app.resources import Resources
from tests.support.processes import run_cli


def _create_user(
    env: dict[str, str],
    *extra: str,
    password: str = "correct horse battery",  # noqa: S107 - a test value
) -> subprocess.CompletedProcess[str]:
    return run_cli(
        {**env, "ONCEREPLY_PASSWORD": password}, "create-user", "--email", "Ana@Example.com", *extra
    )


async def test_create_user_then_duplicate_then_if_missing(
    test_env: dict[str, str], resources: Resources
) -> None:
    first = _create_user(test_env, "--workspace", "Ana's bakery")
    assert first.returncode == 0, first.stderr
    async with resources.engine.connect() as conn:
        row = (
            await conn.execute(
                text(
                    "SELECT u.email, u.password_hash, w.name, m.role FROM users u "
                    "JOIN workspace_members m ON m.user_id = u.id "
                    "JOIN workspaces w ON w.id = m.workspace_id"
                )
            )
        ).one()
    assert row.email == "ana@example.com"
    assert row.password_hash.startswith("$argon2id$")
    assert "correct horse" not in row.password_hash
    assert (row.name, row.role) == ("Ana's bakery", "owner")

    again = _create_user(test_env)
    assert again.returncode == 1
    assert "already exists" in again.stderr
    assert _create_user(test_env, "--if-missing").returncode == 0


def test_weak_password_is_refused_with_a_reason(test_env: dict[str, str]) -> None:
    result = run_cli(test_env, "create-user", "--email", "b@example.com", "--password", "short")
    assert result.returncode == 2
    assert "at least 10 characters" in result.stderr


async def test_reset_password_sets_the_password_of_an_existing_user(
    test_env: dict[str, str], resources: Resources
) -> None:
    # make dev relies on it: the demo login it prints must work even when .env was rewritten
    # while the database kept the user.
    assert _create_user(test_env).returncode == 0
    reset = _create_user(test_env, "--reset-password", password="a brand new passphrase")
    assert reset.returncode == 0, reset.stderr
    async with resources.engine.connect() as conn:
        hashes = (await conn.execute(text("SELECT password_hash FROM users"))).scalars().all()
    assert len(hashes) == 1
    assert verify_password(hashes[0], "a brand new passphrase")
    assert not verify_password(hashes[0], "correct horse battery")
    weak = _create_user(test_env, "--reset-password", password="short")
    assert weak.returncode == 2
