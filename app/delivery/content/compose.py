"""What each kind of DM says, built from a campaign's settings (pure).

- the reveal: the campaign's DM with its link buttons (`messages.build_message`), with the
  plain-text fallback for when Meta refuses the template itself; each link made tracked by
  the `track` function the sender passes (`app.clicks.links.LinkTracker.track`). Sent as a DM
  to the person's IGSID (after a tap or a DM), it may also carry the campaign's image, sent
  just before it (`Content.lead`), or be its card instead, whose fallbacks are the text with
  buttons, then plain text (`app.campaigns.media_message`). A comment's private reply never
  carries either: Meta allows text and a button template there;
- the opening DM: `opening_dm_text` with one postback button ("Send me the link");
- the follow prompt: `follow_prompt_text` with one postback button ("I'm following");
- the follow-up: the text frozen when it was scheduled, as plain text.

The two postback templates have no text fallback: a link in plain text would skip the tap (and
the follow gate), and a prompt without its button cannot be answered.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.campaigns.media_message import Card, card_message, image_message
from app.campaigns.message_format import (
    TEXT_MAX_BYTES,
    LinkButton,
    OutgoingMessage,
    build_message,
    buttons_of,
    cut_bytes,
    postback_message,
    text_message,
)
from app.db.models import MessageKind
from app.delivery.content.postbacks import opening_payload, prompt_payload

DEFAULT_OPENING_TEXT = "Tap the button below and I'll send it right over."
DEFAULT_OPENING_BUTTON = "Send me the link"
DEFAULT_PROMPT_TEXT = "Follow me first, then tap the button below to get the link."
DEFAULT_PROMPT_BUTTON = "I'm following"

# (button index, destination) -> the URL that goes out in the DM.
TrackLink = Callable[[int, str], str]


@dataclass(frozen=True, slots=True)
class Content:
    kind: MessageKind
    message: OutgoingMessage
    # Tried in order under the same claim while Meta refuses the template itself (nothing was
    # delivered).
    fallbacks: tuple[OutgoingMessage, ...] = ()
    # Sent just before `message`, under the same claim: the campaign's image. Its answer
    # decides nothing about the leg, which is the message's.
    lead: OutgoingMessage | None = None


@dataclass(frozen=True, slots=True)
class CampaignTexts:
    """The campaign settings the messages are made of (a log row carries them, and so does
    the editor's form for its preview)."""

    campaign_id: int
    dm_text: str
    buttons: Sequence[Mapping[str, Any]]
    opening_dm_text: str | None = None
    opening_dm_button_title: str | None = None
    follow_gate: bool = False
    follow_prompt_text: str | None = None
    follow_prompt_button_title: str | None = None
    image_url: str | None = None
    card: Card | None = None


def reveal(
    texts: CampaignTexts,
    *,
    username: str | None,
    track: TrackLink | None = None,
    direct: bool = False,
) -> Content:
    """The link message; `direct`: a DM to the person's IGSID, where images and cards go."""
    buttons = buttons_of(texts.buttons)
    if track is not None:
        buttons = [LinkButton(b.title, track(i, b.url)) for i, b in enumerate(buttons)]
    message = build_message(texts.dm_text, buttons, username=username)
    fallbacks: tuple[OutgoingMessage, ...] = ()
    if message.kind == "template":
        fallbacks = (text_message(texts.dm_text, buttons, username=username),)
    if not direct:
        return Content(MessageKind.REVEAL, message, fallbacks)
    if texts.card is not None:
        card = card_message(texts.card, buttons, image_url=texts.image_url, username=username)
        return Content(MessageKind.REVEAL, card, (message, *fallbacks))
    lead = image_message(texts.image_url) if texts.image_url else None
    return Content(MessageKind.REVEAL, message, fallbacks, lead)


def opening_dm(texts: CampaignTexts, *, username: str | None) -> Content:
    message = postback_message(
        texts.opening_dm_text or "",
        title=texts.opening_dm_button_title or "",
        payload=opening_payload(texts.campaign_id, follow_gate=texts.follow_gate),
        username=username,
        default_text=DEFAULT_OPENING_TEXT,
        default_title=DEFAULT_OPENING_BUTTON,
    )
    return Content(MessageKind.OPENING_DM, message)


def follow_prompt(texts: CampaignTexts, *, username: str | None) -> Content:
    message = postback_message(
        texts.follow_prompt_text or "",
        title=texts.follow_prompt_button_title or "",
        payload=prompt_payload(texts.campaign_id),
        username=username,
        default_text=DEFAULT_PROMPT_TEXT,
        default_title=DEFAULT_PROMPT_BUTTON,
    )
    return Content(MessageKind.FOLLOW_PROMPT, message)


def follow_up(frozen_text: str) -> Content:
    text = cut_bytes(frozen_text.strip(), TEXT_MAX_BYTES)
    return Content(MessageKind.FOLLOW_UP, OutgoingMessage("text", {"text": text}, text))


def content_for(
    kind: MessageKind,
    texts: CampaignTexts,
    *,
    username: str | None,
    frozen_text: str | None,
    track: TrackLink | None = None,
    direct: bool = False,
) -> Content:
    if kind is MessageKind.OPENING_DM:
        return opening_dm(texts, username=username)
    if kind is MessageKind.FOLLOW_PROMPT:
        return follow_prompt(texts, username=username)
    if kind is MessageKind.FOLLOW_UP:
        return follow_up(frozen_text or "")
    return reveal(texts, username=username, track=track, direct=direct)
