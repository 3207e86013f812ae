"""The postback payloads we put on buttons, and the key that claims a tap once.

A button we send carries one of these payloads:

- `reveal:<campaign id>:open` — the opening DM's button when the campaign has no follow gate;
- `followcheck:<campaign id>:open` — the opening DM's button when it has one;
- `followcheck:<campaign id>` — the follow prompt's button ("I'm following").

`reveal:<campaign id>` (no marker) is accepted too. Anything else is a tap on a button we did
not issue: it stays a ledger record, never work.

The payload only says which campaign and which button; what a tap earns is decided when it is
processed, from the campaign as it is then (`app.delivery.content.follow_gate`): a creator who turns
the follow gate on gates the opening DMs already out there too.

A tap is claimed by inserting `postback_key(account, campaign, person, postback mid)` into
`postback_deliveries`: Meta redelivering the same tap finds the key taken.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from enum import StrEnum


class TapAction(StrEnum):
    REVEAL = "reveal"  # "send me the link" (no follow check unless the gate is on)
    FOLLOW_CHECK = "followcheck"  # "I'm following": check, then reveal or ask again


@dataclass(frozen=True, slots=True)
class Tap:
    """A parsed payload: which campaign, which button."""

    action: TapAction
    campaign_id: int
    # The opening DM's own button: the person has not been asked to follow yet.
    opening: bool = False

    @property
    def payload(self) -> str:
        return issue_payload(self.action, self.campaign_id, opening=self.opening)


_PAYLOAD = re.compile(r"^(reveal|followcheck):([1-9][0-9]{0,18})(:open)?$")
# Postgres bigint: a longer number cannot name a campaign.
_MAX_ID = 2**63 - 1


def issue_payload(action: TapAction, campaign_id: int, *, opening: bool = False) -> str:
    return f"{action.value}:{campaign_id}{':open' if opening else ''}"


def opening_payload(campaign_id: int, *, follow_gate: bool) -> str:
    """The opening DM's button: a follow check first when the campaign is gated."""
    action = TapAction.FOLLOW_CHECK if follow_gate else TapAction.REVEAL
    return issue_payload(action, campaign_id, opening=True)


def prompt_payload(campaign_id: int) -> str:
    return issue_payload(TapAction.FOLLOW_CHECK, campaign_id)


def parse_payload(payload: str | None) -> Tap | None:
    """The tap a payload stands for, or None for a payload we did not issue."""
    if not payload:
        return None
    match = _PAYLOAD.match(payload.strip())
    if match is None:
        return None
    campaign_id = int(match.group(2))
    if campaign_id > _MAX_ID:
        return None
    return Tap(TapAction(match.group(1)), campaign_id, opening=match.group(3) is not None)


def postback_key(account_id: int, campaign_id: int, igsid: str, mid: str) -> str:
    """sha256 of (account, campaign, person, postback mid): 64 hex characters."""
    material = "\x1f".join((str(account_id), str(campaign_id), igsid, mid))
    return hashlib.sha256(material.encode()).hexdigest()
