"""Webhook signatures: `X-Hub-Signature-256` checked over the exact raw request bytes.

Meta signs the body it sends with HMAC-SHA256 and puts `sha256=<64 hex>` in the header. The
body must never be re-serialized before the check: Meta escapes non-ASCII as `\\uXXXX` and `/`
as `\\/`, so any round trip through a JSON library changes the bytes. Instagram-Login apps
have been seen signing with the Instagram app secret and with the Meta app secret, so every
configured secret is tried; each comparison is constant-time and all of them are made, so the
time taken does not depend on which secret (if any) matched.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

SIGNATURE_HEADER = "X-Hub-Signature-256"
_PREFIX = "sha256="
_HEX_DIGITS = frozenset("0123456789abcdef")


class SignatureProblem(StrEnum):
    MISSING = "missing"
    # Not `sha256=` followed by 64 hex digits (e.g. the legacy `sha1=` form on its own).
    MALFORMED = "malformed"
    MISMATCH = "mismatch"


@dataclass(frozen=True, slots=True)
class SignatureCheck:
    """The verdict: which named secret signed the body, or what was wrong."""

    key_name: str | None
    problem: SignatureProblem | None

    @property
    def ok(self) -> bool:
        return self.key_name is not None


def sign_body(body: bytes, secret: str | bytes) -> str:
    """The header value Meta would send for `body` signed with `secret`."""
    key = secret.encode() if isinstance(secret, str) else secret
    return _PREFIX + hmac.new(key, body, hashlib.sha256).hexdigest()


def verify_signature(
    body: bytes, header: str | None, secrets: Sequence[tuple[str, bytes]]
) -> SignatureCheck:
    """Check `header` against HMAC-SHA256(`body`) under each `(name, secret)`."""
    if not header:
        return SignatureCheck(None, SignatureProblem.MISSING)
    value = header.strip()
    if value[: len(_PREFIX)].lower() != _PREFIX:
        return SignatureCheck(None, SignatureProblem.MALFORMED)
    claimed = value[len(_PREFIX) :].lower()
    if len(claimed) != 64 or not _HEX_DIGITS.issuperset(claimed):
        return SignatureCheck(None, SignatureProblem.MALFORMED)
    matched: str | None = None
    claimed_bytes = claimed.encode()
    for name, secret in secrets:
        expected = hmac.new(secret, body, hashlib.sha256).hexdigest().encode()
        if hmac.compare_digest(expected, claimed_bytes) and matched is None:
            matched = name
    if matched is None:
        return SignatureCheck(None, SignatureProblem.MISMATCH)
    return SignatureCheck(matched, None)
