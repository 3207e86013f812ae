"""Signed link tokens: the delivery, the button and the destination, in the URL itself.

The redirect must answer while PostgreSQL or Redis is down, so it cannot look a short code up:
the token carries everything it needs. Layout (then base64url, no padding): a version byte,
the `dm_logs` id as a varint, the button index, the destination URL in UTF-8, and the first
12 bytes of an HMAC-SHA256 over all of that. A token that does not verify is unknown: the
redirect shows its not-found page. The key is derived from `SECRET_KEY` (`link_key`), so
changing that key retires every link already sent.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from dataclasses import dataclass

_VERSION = 1
_MAC_BYTES = 12
# Enough for any URL a campaign can hold, and a bound on the work a hostile path can cause.
MAX_TOKEN_CHARS = 4096
MAX_BUTTON = 15


@dataclass(frozen=True, slots=True)
class LinkTarget:
    dm_log_id: int
    button: int
    url: str


def link_key(secret_key: str) -> bytes:
    """The HMAC key for link tokens, apart from every other use of the secret."""
    return hmac.new(secret_key.encode(), b"oncereply link tokens v1", hashlib.sha256).digest()


def make_token(key: bytes, target: LinkTarget) -> str:
    if target.dm_log_id < 0 or not 0 <= target.button <= MAX_BUTTON:
        raise ValueError("a link token needs a delivery id and a button index 0-15")
    payload = (
        bytes((_VERSION,))
        + _varint(target.dm_log_id)
        + bytes((target.button,))
        + target.url.encode("utf-8")
    )
    mac = hmac.digest(key, payload, "sha256")[:_MAC_BYTES]
    return base64.urlsafe_b64encode(payload + mac).rstrip(b"=").decode("ascii")


def read_token(key: bytes, token: str) -> LinkTarget | None:
    """The target of a genuine token; None for anything else (tampered, cut, foreign)."""
    if not token or len(token) > MAX_TOKEN_CHARS:
        return None
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    except (binascii.Error, ValueError):
        return None
    if len(raw) < 1 + 1 + 1 + _MAC_BYTES:
        return None
    payload, mac = raw[:-_MAC_BYTES], raw[-_MAC_BYTES:]
    expected = hmac.digest(key, payload, "sha256")[:_MAC_BYTES]
    if not hmac.compare_digest(mac, expected) or payload[0] != _VERSION:
        return None
    dm_log_id, at = _read_varint(payload, 1)
    if dm_log_id is None or at >= len(payload):
        return None
    button = payload[at]
    try:
        url = payload[at + 1 :].decode("utf-8")
    except UnicodeDecodeError:
        return None
    if button > MAX_BUTTON or not url.startswith(("http://", "https://")):
        return None
    return LinkTarget(dm_log_id, button, url)


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _read_varint(data: bytes, at: int) -> tuple[int | None, int]:
    value = shift = 0
    while at < len(data) and shift <= 63:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7
    return None, at
