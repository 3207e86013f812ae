"""Encryption at rest for Instagram access tokens: AES-256-GCM with rotatable keys.

A ciphertext is `nonce (12 bytes) || ciphertext || tag (16 bytes)`, stored beside the id of the
key that made it. The key id is derived from the key itself (first 8 hex digits of its SHA-256),
so rotating means: put the new key in `ENCRYPTION_KEY`, move the old one to
`ENCRYPTION_OLD_KEYS`, and every stored token still decrypts; then `python -m app
rotate-tokens` (app/accounts/token_rotation.py) re-encrypts every row whose key id is not the
current one. The account id is bound in as associated data, so a ciphertext copied onto
another account's row does not decrypt.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

_NONCE_BYTES = 12


class TokenDecryptError(Exception):
    """The ciphertext cannot be opened: unknown key id, wrong key, or tampered bytes."""


@dataclass(frozen=True, slots=True)
class SealedToken:
    ciphertext: bytes
    key_id: str


def key_id_for(key: bytes) -> str:
    return hashlib.sha256(key).hexdigest()[:8]


class TokenCipher:
    def __init__(self, current_key: bytes, old_keys: tuple[bytes, ...] = ()) -> None:
        for key in (current_key, *old_keys):
            if len(key) != 32:
                raise ValueError("AES-256 keys are 32 bytes")
        self._current_id = key_id_for(current_key)
        self._keys = {key_id_for(key): AESGCM(key) for key in (*old_keys, current_key)}

    @property
    def current_key_id(self) -> str:
        return self._current_id

    def encrypt(self, plaintext: str, *, context: str) -> SealedToken:
        nonce = os.urandom(_NONCE_BYTES)
        sealed = self._keys[self._current_id].encrypt(nonce, plaintext.encode(), context.encode())
        return SealedToken(ciphertext=nonce + sealed, key_id=self._current_id)

    def decrypt(self, token: SealedToken, *, context: str) -> str:
        aead = self._keys.get(token.key_id)
        if aead is None:
            raise TokenDecryptError(f"no key with id {token.key_id} is configured")
        nonce, sealed = token.ciphertext[:_NONCE_BYTES], token.ciphertext[_NONCE_BYTES:]
        try:
            return aead.decrypt(nonce, sealed, context.encode()).decode()
        except InvalidTag:
            raise TokenDecryptError("ciphertext does not match its key or context") from None

    def needs_rotation(self, token: SealedToken) -> bool:
        return token.key_id != self._current_id
