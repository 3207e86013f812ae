"""`python -m app rotate-tokens`: every stored token re-sealed under the current key, on the
real schema, without ever overwriting a token that changed between the read and the write."""

from __future__ import annotations

import subprocess

from sqlalchemy import select

from app.accounts.token_rotation import ResealOutcome, StoredToken, reseal_token
from app.accounts.tokens import open_access_token, seal_access_token
from app.crypto import TokenCipher, key_id_for
from app.db.models import InstagramAccount, Workspace
from app.resources import Resources
from tests.support.processes import run_cli

NEW_KEY = bytes.fromhex("11" * 32)  # the ENCRYPTION_KEY of test_env
OLD_KEY = bytes.fromhex("22" * 32)
LOST_KEY = bytes.fromhex("33" * 32)  # a key nobody configured any more


def _rotate(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run_cli({**env, "ENCRYPTION_OLD_KEYS": OLD_KEY.hex()}, "rotate-tokens")


async def _seed(resources: Resources, tokens: dict[str, tuple[bytes, str] | None]) -> None:
    """One account per name; its token sealed with the given key, or no token at all."""
    async with resources.sessionmaker() as session, session.begin():
        workspace = Workspace(name="Rotation")
        session.add(workspace)
        await session.flush()
        for index, (username, sealed_with) in enumerate(tokens.items()):
            account = InstagramAccount(
                workspace_id=workspace.id, ig_user_id=f"1784100000000{index}", username=username
            )
            if sealed_with is not None:
                key, token = sealed_with
                seal_access_token(TokenCipher(key), account, token)
            session.add(account)


async def _accounts(resources: Resources) -> dict[str, InstagramAccount]:
    async with resources.sessionmaker() as session:
        rows = (await session.execute(select(InstagramAccount))).scalars().all()
    return {row.username: row for row in rows}


async def test_rotate_tokens_reseals_old_ones_and_reports_what_it_cannot_open(
    test_env: dict[str, str], resources: Resources
) -> None:
    await _seed(
        resources,
        {
            "old.one": (OLD_KEY, "IGAA-old-one"),
            "old.two": (OLD_KEY, "IGAA-old-two"),
            "current": (NEW_KEY, "IGAA-current"),
            "lost": (LOST_KEY, "IGAA-lost"),
            "disconnected": None,
        },
    )
    before = await _accounts(resources)

    first = _rotate(test_env)
    # The lost key's token is still not under the current key, so the run is not "done".
    assert first.returncode == 1, first.stderr
    assert "re-sealed 2, already current 1" in first.stdout
    assert "unreadable 1" in first.stdout
    assert f"instagram_accounts.id {before['lost'].id}" in first.stdout
    assert "IGAA" not in first.stdout + first.stderr

    after = await _accounts(resources)
    only_new_key = TokenCipher(NEW_KEY)
    for username, token in (
        ("old.one", "IGAA-old-one"),
        ("old.two", "IGAA-old-two"),
        ("current", "IGAA-current"),
    ):
        assert after[username].token_key_id == key_id_for(NEW_KEY)
        assert open_access_token(only_new_key, after[username]) == token
    assert after["old.one"].token_ciphertext != before["old.one"].token_ciphertext
    assert after["current"].token_ciphertext == before["current"].token_ciphertext
    assert after["lost"].token_ciphertext == before["lost"].token_ciphertext
    assert after["lost"].token_key_id == key_id_for(LOST_KEY)
    assert after["disconnected"].token_ciphertext is None
    assert after["disconnected"].token_key_id is None

    async with resources.sessionmaker() as session, session.begin():
        lost = await session.get(InstagramAccount, before["lost"].id)
        assert lost is not None
        await session.delete(lost)
    second = _rotate(test_env)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "re-sealed 0, already current 3" in second.stdout
    assert "ENCRYPTION_OLD_KEYS can be emptied" in second.stdout


async def test_a_token_replaced_after_the_read_is_left_as_its_writer_stored_it(
    resources: Resources,
) -> None:
    await _seed(resources, {"racing": (OLD_KEY, "IGAA-before-refresh")})
    (account,) = (await _accounts(resources)).values()
    assert account.token_ciphertext is not None
    stale = StoredToken(
        account.id, account.ig_user_id, account.token_ciphertext, account.token_key_id
    )
    cipher = TokenCipher(NEW_KEY, (OLD_KEY,))

    # A refresh lands between the rotation's read and its write.
    async with resources.sessionmaker() as session, session.begin():
        row = await session.get(InstagramAccount, account.id)
        assert row is not None
        seal_access_token(cipher, row, "IGAA-after-refresh")
    refreshed = (await _accounts(resources))["racing"]

    async with resources.sessionmaker() as session, session.begin():
        outcome = await reseal_token(session, cipher, stale)
    assert outcome is ResealOutcome.CHANGED
    now = (await _accounts(resources))["racing"]
    assert now.token_ciphertext == refreshed.token_ciphertext
    assert open_access_token(cipher, now) == "IGAA-after-refresh"

    # Read afresh, the same row re-seals (here: already under the new key, re-sealed anyway).
    assert now.token_ciphertext is not None
    fresh = StoredToken(now.id, now.ig_user_id, now.token_ciphertext, now.token_key_id)
    async with resources.sessionmaker() as session, session.begin():
        assert await reseal_token(session, cipher, fresh) is ResealOutcome.RESEALED
    assert open_access_token(cipher, (await _accounts(resources))["racing"]) == (
        "IGAA-after-refresh"
    )
