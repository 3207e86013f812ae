"""X-Hub-Signature-256: HMAC-SHA256 over the raw bytes, either configured secret."""

from __future__ import annotations

import hashlib
import hmac

from app.instagram.signature import SignatureProblem, sign_body, verify_signature

SECRETS = (("instagram", b"ig-secret"), ("meta", b"meta-secret"))
# Meta escapes non-ASCII and slashes; the signature covers these exact bytes.
BODY = b'{"object":"instagram","entry":[{"id":"1","text":"\\u00e4\\u00f6 https:\\/\\/x.y"}]}'


def _hex(secret: bytes, body: bytes) -> str:
    return hmac.new(secret, body, hashlib.sha256).hexdigest()


def test_either_secret_verifies_and_is_named() -> None:
    assert verify_signature(BODY, "sha256=" + _hex(b"ig-secret", BODY), SECRETS).key_name == (
        "instagram"
    )
    check = verify_signature(BODY, "sha256=" + _hex(b"meta-secret", BODY), SECRETS)
    assert check.ok
    assert check.key_name == "meta"
    assert sign_body(BODY, "meta-secret") == "sha256=" + _hex(b"meta-secret", BODY)


def test_uppercase_hex_and_surrounding_space_are_accepted() -> None:
    header = "  SHA256=" + _hex(b"ig-secret", BODY).upper() + " "
    assert verify_signature(BODY, header, SECRETS).ok


def test_missing_signature() -> None:
    for header in (None, ""):
        check = verify_signature(BODY, header, SECRETS)
        assert not check.ok
        assert check.problem is SignatureProblem.MISSING


def test_wrong_prefix_or_shape_is_malformed() -> None:
    digest = _hex(b"ig-secret", BODY)
    sha1 = hmac.new(b"ig-secret", BODY, hashlib.sha1).hexdigest()
    for header in (
        "sha1=" + sha1,
        digest,  # no prefix
        "sha256:" + digest,
        "sha256=" + digest[:-1],
        "sha256=" + digest + "00",
        "sha256=" + "z" * 64,
    ):
        check = verify_signature(BODY, header, SECRETS)
        assert check.problem is SignatureProblem.MALFORMED, header


def test_wrong_secret_or_changed_bytes_is_a_mismatch() -> None:
    assert (
        verify_signature(BODY, "sha256=" + _hex(b"other", BODY), SECRETS).problem
        is SignatureProblem.MISMATCH
    )
    # The same JSON re-serialized (unescaped) is different bytes: the signature must not pass.
    reserialized = BODY.replace(b"\\u00e4\\u00f6", "äö".encode()).replace(b"\\/", b"/")
    header = "sha256=" + _hex(b"ig-secret", BODY)
    assert verify_signature(reserialized, header, SECRETS).problem is SignatureProblem.MISMATCH
    assert verify_signature(BODY + b" ", header, SECRETS).problem is SignatureProblem.MISMATCH


def test_no_configured_secret_accepts_nothing() -> None:
    header = "sha256=" + _hex(b"ig-secret", BODY)
    assert verify_signature(BODY, header, ()).problem is SignatureProblem.MISMATCH
