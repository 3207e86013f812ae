"""The migrated schema enforces the keys the delivery protocol stands on."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from app.resources import Resources


async def _seed_account(resources: Resources) -> None:
    async with resources.engine.begin() as conn:
        await conn.execute(
            text("INSERT INTO workspaces (id, name) OVERRIDING SYSTEM VALUE VALUES (1, 'w')")
        )
        await conn.execute(
            text(
                "INSERT INTO instagram_accounts (id, workspace_id, ig_user_id, username) "
                "OVERRIDING SYSTEM VALUE VALUES (1, 1, '17841405822304914', 'sunny')"
            )
        )


async def test_one_dm_log_per_account_and_trigger(resources: Resources) -> None:
    await _seed_account(resources)
    insert = text(
        "INSERT INTO dm_logs (workspace_id, account_id, trigger_kind, trigger_id) "
        "VALUES (1, 1, 'comment', '17870913679156914') "
        "ON CONFLICT DO NOTHING RETURNING id, pr_state"
    )
    async with resources.engine.begin() as conn:
        first = (await conn.execute(insert)).one()
        assert first.pr_state == "PENDING"
        assert (await conn.execute(insert)).first() is None


async def test_one_ledger_row_per_comment_and_states_are_checked(resources: Resources) -> None:
    await _seed_account(resources)
    async with resources.engine.begin() as conn:
        await conn.execute(
            text(
                "INSERT INTO comments (account_id, comment_id, commented_at, first_seen_via) "
                "VALUES (1, 'c1', now(), 'webhook')"
            )
        )
    with pytest.raises(IntegrityError):
        async with resources.engine.begin() as conn:
            await conn.execute(
                text(
                    "INSERT INTO comments (account_id, comment_id, commented_at, first_seen_via) "
                    "VALUES (1, 'c1', now(), 'poll')"
                )
            )
    with pytest.raises(IntegrityError):
        async with resources.engine.begin() as conn:
            await conn.execute(
                text(
                    "INSERT INTO dm_logs (workspace_id, account_id, trigger_kind, trigger_id, "
                    "pr_state) VALUES (1, 1, 'comment', 'c2', 'MAYBE_SENT')"
                )
            )


async def test_instagram_account_belongs_to_one_workspace(resources: Resources) -> None:
    await _seed_account(resources)
    async with resources.engine.begin() as conn:
        await conn.execute(
            text("INSERT INTO workspaces (id, name) OVERRIDING SYSTEM VALUE VALUES (2, 'x')")
        )
    with pytest.raises(IntegrityError):
        async with resources.engine.begin() as conn:
            await conn.execute(
                text(
                    "INSERT INTO instagram_accounts (workspace_id, ig_user_id, username) "
                    "VALUES (2, '17841405822304914', 'sunny')"
                )
            )


async def test_user_emails_are_stored_lower_case(resources: Resources) -> None:
    insert = text("INSERT INTO users (email, password_hash) VALUES (:email, 'x')")
    async with resources.engine.begin() as conn:
        await conn.execute(insert, {"email": "ana@example.com"})
    # A writer that skipped normalize_email would otherwise make a second "Ana" account.
    with pytest.raises(IntegrityError, match="ck_users_email_lower_case"):
        async with resources.engine.begin() as conn:
            await conn.execute(insert, {"email": "Ana@example.com"})
