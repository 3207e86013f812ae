"""Meta's `signed_request`: what the deauthorize and data-deletion callbacks POST.

The value is `<signature>.<payload>`, both base64url without padding; the payload is a JSON
object with `algorithm` ("HMAC-SHA256"), `issued_at` and `user_id`, and the signature is
HMAC-SHA256 of the payload's base64url text (not of the decoded JSON) under the app secret.
As with webhooks, every configured secret is tried in constant time, since Instagram-Login
apps have been seen signing with the Instagram app secret and with the Meta app secret.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

# Far beyond any real one (a few hundred bytes); refuse before decoding anything bigger.
MAX_SIGNED_REQUEST_CHARS = 8192
_BASE64URL = re.compile(r"^[A-Za-z0-9_-]+={0,2}$")


class SignedRequestProblem(StrEnum):
    MISSING = "missing"
    MALFORMED = "malformed"
    MISMATCH = "mismatch"


class SignedRequestError(Exception):
    def __init__(self, problem: SignedRequestProblem) -> None:
        super().__init__(f"signed_request {problem}")
        self.problem = problem


@dataclass(frozen=True, slots=True)
class SignedRequest:
    user_id: str
    issued_at: int | None
    payload: dict[str, Any]


def _b64decode(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def _b64encode(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def make_signed_request(payload: dict[str, Any], secret: str | bytes) -> str:
    """The `signed_request` Meta would send for `payload` under `secret`."""
    key = secret.encode() if isinstance(secret, str) else secret
    body = _b64encode(json.dumps({"algorithm": "HMAC-SHA256", **payload}).encode())
    return _b64encode(hmac.new(key, body.encode(), hashlib.sha256).digest()) + "." + body


def parse_signed_request(raw: str | None, secrets: Sequence[tuple[str, bytes]]) -> SignedRequest:
    """Verify and decode; raises `SignedRequestError` saying what was wrong."""
    if not raw:
        raise SignedRequestError(SignedRequestProblem.MISSING)
    signature_part, _, payload_part = raw.strip().partition(".")
    if (
        len(raw) > MAX_SIGNED_REQUEST_CHARS
        or not _BASE64URL.match(signature_part)
        or not _BASE64URL.match(payload_part)
    ):
        raise SignedRequestError(SignedRequestProblem.MALFORMED)
    try:
        claimed = _b64decode(signature_part.rstrip("="))
    except (binascii.Error, ValueError):
        raise SignedRequestError(SignedRequestProblem.MALFORMED) from None
    encoded = payload_part.encode("ascii")
    matched = False
    for _, secret in secrets:
        expected = hmac.new(secret, encoded, hashlib.sha256).digest()
        matched = hmac.compare_digest(expected, claimed) or matched
    if not matched:
        raise SignedRequestError(SignedRequestProblem.MISMATCH)
    try:
        payload = json.loads(_b64decode(payload_part.rstrip("=")))
    except (binascii.Error, ValueError):
        raise SignedRequestError(SignedRequestProblem.MALFORMED) from None
    if not isinstance(payload, dict):
        raise SignedRequestError(SignedRequestProblem.MALFORMED)
    algorithm = str(payload.get("algorithm", "")).upper()
    user_id = str(payload.get("user_id") or "")
    if algorithm != "HMAC-SHA256" or not user_id.isdigit() or len(user_id) > 32:
        raise SignedRequestError(SignedRequestProblem.MALFORMED)
    issued_at = payload.get("issued_at")
    return SignedRequest(
        user_id=user_id,
        issued_at=issued_at if isinstance(issued_at, int) and issued_at >= 0 else None,
        payload=payload,
    )
