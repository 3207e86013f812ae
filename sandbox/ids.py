"""Identifiers in the formats Meta uses.

Object ids are ~17-digit numeric strings, IGSIDs ~16 digits, message and conversation ids are
base64 of an ``ig_...`` string (so they start with ``aWdf``), tokens start with ``IGAA``.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import string

_ALNUM = string.ascii_letters + string.digits


class IdFactory:
    """Hands out fresh ids that never collide with ids already in the world."""

    def __init__(self) -> None:
        # A random start keeps ids from different sandbox runs apart, so a product database
        # that outlives a sandbox restart does not confuse old and new objects.
        self._next_object = 17_800_000_000_000_000 + secrets.randbelow(10**14)
        self._message_seq = secrets.randbelow(10**12)
        self._taken: set[str] = set()

    def reserve(self, value: str) -> None:
        self._taken.add(value)

    def object_id(self) -> str:
        """A 17-digit id for a media object, comment or account."""
        while True:
            self._next_object += 1 + secrets.randbelow(7)
            value = str(self._next_object)
            if value not in self._taken:
                self._taken.add(value)
                return value

    def mid(self, account_id: str) -> str:
        """A message id: base64 of ``ig_message_item:...``, so it starts with ``aWdf``."""
        self._message_seq += 1
        raw = f"ig_message_item:1:IGMessageData:{account_id}:{self._message_seq:039d}"
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def derived_igsid(fan_username: str, account_id: str) -> str:
    """The IGSID a fan has towards one business account.

    IGSIDs are scoped per business account on Instagram, so the same person has a different
    id for each account. Derived from a hash so it is stable across restarts and resets.
    """
    digest = hashlib.sha256(f"igsid:{fan_username}:{account_id}".encode()).digest()
    return "1" + str(int.from_bytes(digest[:8], "big") % 10**15).zfill(15)


def conversation_id(account_id: str, igsid: str) -> str:
    raw = f"ig_thread:1:IGThread:{account_id}:{igsid}"
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def access_token() -> str:
    return "IGAA" + "".join(secrets.choice(_ALNUM) for _ in range(140))


def auth_code() -> str:
    return "AQB" + secrets.token_urlsafe(96)


def fbtrace_id() -> str:
    return "A" + "".join(secrets.choice(_ALNUM) for _ in range(22))


def challenge() -> str:
    return str(1_000_000_000 + secrets.randbelow(9 * 10**9))
