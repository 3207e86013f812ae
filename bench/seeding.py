"""The connected Instagram account a benchmark delivers from: a workspace and an account whose
token is sealed the way connecting seals it, so workers can open it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg


def connected_account(
    conn: psycopg.Connection[Any],
    *,
    workspace_name: str,
    ig_user_id: str,
    username: str,
    token: str,
    encryption_key: str,
) -> tuple[int, int]:
    """Insert a workspace and its connected account; their ids."""
    # Imported here: a benchmark's parent process need not load the app to parse its options.
    from app.accounts.tokens import seal_access_token
    from app.crypto import TokenCipher
    from app.db.models import InstagramAccount

    sealed = InstagramAccount(ig_user_id=ig_user_id)
    seal_access_token(TokenCipher(bytes.fromhex(encryption_key)), sealed, token)
    now = datetime.now(UTC)
    workspace = conn.execute(
        "INSERT INTO workspaces (name) VALUES (%s) RETURNING id", (workspace_name,)
    ).fetchone()
    if workspace is None:
        raise RuntimeError("seeding the benchmark's workspace failed")
    account = conn.execute(
        "INSERT INTO instagram_accounts (workspace_id, ig_user_id, username, "
        "token_ciphertext, token_key_id, token_issued_at, token_expires_at) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING id",
        (
            workspace[0],
            ig_user_id,
            username,
            sealed.token_ciphertext,
            sealed.token_key_id,
            now - timedelta(days=2),
            now + timedelta(days=58),
        ),
    ).fetchone()
    if account is None:
        raise RuntimeError("seeding the benchmark's account failed")
    return int(workspace[0]), int(account[0])
