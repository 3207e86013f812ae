"""Sealing and opening an account's access token; the only place tokens meet the cipher.

The associated data binds a ciphertext to the professional account it belongs to, so a
token row copied onto another account does not decrypt.
"""

from __future__ import annotations

from typing import Protocol

from app.crypto import SealedToken, TokenCipher
from app.db.models import InstagramAccount


class MissingTokenError(Exception):
    """The account has no stored token (disconnected, or never finished connecting)."""


def _context(ig_user_id: str) -> str:
    return f"instagram_account:{ig_user_id}"


def seal_access_token(cipher: TokenCipher, account: InstagramAccount, token: str) -> None:
    """Encrypt `token` onto the account row (the caller commits)."""
    sealed = cipher.encrypt(token, context=_context(account.ig_user_id))
    account.token_ciphertext = sealed.ciphertext
    account.token_key_id = sealed.key_id


class SealedAccount(Protocol):
    """What opening a token reads: an account row, or a delivery's copy of its columns."""

    @property
    def ig_user_id(self) -> str: ...

    @property
    def token_ciphertext(self) -> bytes | None: ...

    @property
    def token_key_id(self) -> str | None: ...


def open_access_token(cipher: TokenCipher, account: SealedAccount) -> str:
    if account.token_ciphertext is None or account.token_key_id is None:
        raise MissingTokenError(f"account {account.ig_user_id} has no token")
    return cipher.decrypt(
        SealedToken(account.token_ciphertext, account.token_key_id),
        context=_context(account.ig_user_id),
    )
