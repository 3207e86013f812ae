"""Token encryption: AES-256-GCM round trip, tamper detection, context binding, key rotation."""

from __future__ import annotations

import pytest

from app.crypto import SealedToken, TokenCipher, TokenDecryptError, key_id_for

KEY_A = bytes.fromhex("aa" * 32)
KEY_B = bytes.fromhex("bb" * 32)


def test_round_trip_and_fresh_nonce_each_time() -> None:
    cipher = TokenCipher(KEY_A)
    first = cipher.encrypt("IGAAtoken", context="acct:1")
    second = cipher.encrypt("IGAAtoken", context="acct:1")
    assert first.ciphertext != second.ciphertext
    assert b"IGAAtoken" not in first.ciphertext
    assert first.key_id == key_id_for(KEY_A)
    assert cipher.decrypt(first, context="acct:1") == "IGAAtoken"


def test_tampered_ciphertext_is_refused() -> None:
    cipher = TokenCipher(KEY_A)
    sealed = cipher.encrypt("IGAAtoken", context="acct:1")
    flipped = bytearray(sealed.ciphertext)
    flipped[-1] ^= 0x01
    with pytest.raises(TokenDecryptError):
        cipher.decrypt(SealedToken(bytes(flipped), sealed.key_id), context="acct:1")


def test_ciphertext_is_bound_to_its_account() -> None:
    cipher = TokenCipher(KEY_A)
    sealed = cipher.encrypt("IGAAtoken", context="acct:1")
    with pytest.raises(TokenDecryptError):
        cipher.decrypt(sealed, context="acct:2")


def test_rotation_keeps_old_tokens_readable_and_flags_them() -> None:
    old = TokenCipher(KEY_A).encrypt("old-token", context="acct:1")
    rotated = TokenCipher(KEY_B, old_keys=(KEY_A,))
    assert rotated.decrypt(old, context="acct:1") == "old-token"
    assert rotated.needs_rotation(old)
    fresh = rotated.encrypt("new-token", context="acct:1")
    assert fresh.key_id == key_id_for(KEY_B)
    assert not rotated.needs_rotation(fresh)


def test_unknown_key_id_is_a_clear_error() -> None:
    sealed = TokenCipher(KEY_A).encrypt("t", context="c")
    with pytest.raises(TokenDecryptError, match="no key with id"):
        TokenCipher(KEY_B).decrypt(sealed, context="c")


def test_only_256_bit_keys() -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        TokenCipher(b"short")
