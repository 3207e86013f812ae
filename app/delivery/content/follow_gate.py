"""Which message a delivery sends: the opening DM, the follow prompt or the link (pure).

Order when both are on: opening DM → follow gate → link. By path:

| path | gate off | follows | not following | unknown |
|---|---|---|---|---|
| comment (private reply) | opening DM if on, else link | (no check possible: see below) | | |
| tap on the opening DM | link | link | follow prompt | link (fail open) |
| tap on the follow prompt | link | link | re-check later; then prompt again | link (fail open) |
| DM keyword trigger | link | link | follow prompt | follow prompt (fail closed) |

With the gate on, a comment gets the opening DM if that is on, else the follow prompt.

- A comment is not consent: Meta answers the follow check with code 230 until the person
  messages or taps, so a gated comment gets the opening DM or the follow prompt, never a
  check.
- After a tap, "unknown" means Meta would not say (an error, a blocked profile): the person did
  tap our button, so the link goes out. A DM trigger has shown no intent to follow, so
  unknown gets the prompt.
- Meta's follow status lags a new follow by up to about a minute: a "not following" after the
  prompt's "I'm following" is checked again after each of `FOLLOW_RECHECK_DELAYS_S` (default
  20 s, then 40 s more) before the prompt is sent again.
  The opening DM's own button skips the waits: nobody has been asked to follow yet.
- So the person is not left in silence meanwhile, the first "not following yet" after the
  prompt's button also sends `CHECKING_TEXT` at once, as a row of its own (a follow-up row
  keyed `checking:<tap row>`, so once per tap).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from app.db.models import MessageKind
from app.delivery.content.postbacks import Tap, TapAction

DEFAULT_RECHECK_DELAYS_S = (20.0, 40.0)
# What the person reads right after a "not yet" tap, while the re-checks wait.
CHECKING_TEXT = (
    "Checking… give it a minute. Instagram can take a moment to show a new follow; "
    "your link comes as soon as it does."
)
# The `trigger_payload` of that message's row: a follow-up row the campaign's follow-up
# setting does not govern.
CHECKING_PAYLOAD = "follow_gate:checking"


class Path(StrEnum):
    COMMENT = "comment"
    OPENING_TAP = "opening_tap"  # the opening DM's button (or a bare `reveal:` button)
    PROMPT_TAP = "prompt_tap"  # the follow prompt's "I'm following"
    DM_TRIGGER = "dm_trigger"


def tap_path(tap: Tap) -> Path:
    if tap.action is TapAction.FOLLOW_CHECK and not tap.opening:
        return Path.PROMPT_TAP
    return Path.OPENING_TAP


def comment_reply(*, opening_dm: bool, follow_gate: bool) -> MessageKind:
    """The private reply to a matching comment."""
    if opening_dm:
        return MessageKind.OPENING_DM
    if follow_gate:
        return MessageKind.FOLLOW_PROMPT
    return MessageKind.REVEAL


def needs_follow_check(path: Path, *, follow_gate: bool) -> bool:
    return follow_gate and path is not Path.COMMENT


@dataclass(frozen=True, slots=True)
class GateStep:
    """What to do after a tap or a DM trigger (and its follow check)."""

    send: MessageKind | None  # None: check again in `recheck_in_s`
    why: str
    recheck_in_s: float | None = None
    # A prompt tap still "not following" after every re-check: the prompt goes out again,
    # and the refusal is worth one operational INFO event (how often the lag bites).
    refused: bool = False


def decide(
    path: Path,
    *,
    follow_gate: bool,
    follows: bool | None = None,
    rechecks_done: int = 0,
    recheck_delays_s: Sequence[float] = DEFAULT_RECHECK_DELAYS_S,
) -> GateStep:
    """The step for a tap or a DM trigger; `follows` is read only when the gate is on."""
    if path is Path.COMMENT:
        raise ValueError("a comment's private reply is chosen by comment_reply()")
    if not follow_gate:
        return GateStep(MessageKind.REVEAL, "no follow gate")
    if follows is True:
        return GateStep(MessageKind.REVEAL, "follows the account")
    if follows is None:
        if path is Path.DM_TRIGGER:
            return GateStep(MessageKind.FOLLOW_PROMPT, "follow status unknown: ask (fail closed)")
        return GateStep(MessageKind.REVEAL, "follow status unknown after a tap: send (fail open)")
    if path is Path.PROMPT_TAP:
        if rechecks_done < len(recheck_delays_s):
            delay = recheck_delays_s[rechecks_done]
            return GateStep(
                None, f"not following yet: check again in {delay:g} s", recheck_in_s=delay
            )
        return GateStep(
            MessageKind.FOLLOW_PROMPT,
            f"still not following after {rechecks_done} re-checks: ask again",
            refused=True,
        )
    return GateStep(MessageKind.FOLLOW_PROMPT, "not following: ask to follow")
