"""Meta's signed_request: verified under either app secret, refused when forged or malformed."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

import pytest

from app.instagram.signed_request import (
    SignedRequestError,
    SignedRequestProblem,
    make_signed_request,
    parse_signed_request,
)

SECRETS = (("instagram", b"ig-secret"), ("meta", b"meta-secret"))


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def test_a_request_signed_as_meta_does_is_read() -> None:
    payload = _b64(
        json.dumps(
            {"algorithm": "HMAC-SHA256", "issued_at": 1764633600, "user_id": "27640875392278831"}
        ).encode()
    )
    signature = _b64(hmac.new(b"meta-secret", payload.encode(), hashlib.sha256).digest())
    parsed = parse_signed_request(f"{signature}.{payload}", SECRETS)
    assert (parsed.user_id, parsed.issued_at) == ("27640875392278831", 1764633600)


def test_a_numeric_user_id_is_read_as_its_digits() -> None:
    signed = make_signed_request({"user_id": 17841458120395731}, "ig-secret")
    assert parse_signed_request(signed, SECRETS).user_id == "17841458120395731"


def test_the_signature_covers_the_payload_text_exactly() -> None:
    signed = make_signed_request({"user_id": "1"}, "ig-secret")
    with pytest.raises(SignedRequestError):
        parse_signed_request(signed + "=", SECRETS)


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (None, SignedRequestProblem.MISSING),
        ("", SignedRequestProblem.MISSING),
        ("only-one-part", SignedRequestProblem.MALFORMED),
        ("sig.pay load", SignedRequestProblem.MALFORMED),
        (make_signed_request({"user_id": "1"}, "another-secret"), SignedRequestProblem.MISMATCH),
        (
            make_signed_request({"user_id": "1", "algorithm": "none"}, "ig-secret"),
            SignedRequestProblem.MALFORMED,
        ),
        (
            make_signed_request({"user_id": "not digits"}, "ig-secret"),
            SignedRequestProblem.MALFORMED,
        ),
    ],
)
def test_bad_requests_say_what_is_wrong(raw: str | None, problem: SignedRequestProblem) -> None:
    with pytest.raises(SignedRequestError) as caught:
        parse_signed_request(raw, SECRETS)
    assert caught.value.problem is problem
