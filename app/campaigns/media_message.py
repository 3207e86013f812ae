"""Images and cards in a DM: Meta's limits and the Send API objects for them (pure).

- An **image** goes by URL: `{"attachment": {"type": "image", "payload": {"url": …}}}`. Meta
  fetches it itself; it takes JPEG, PNG and GIF of at most 8 MB (Instagram Messaging's
  limits for an image attachment). A message carries text or an attachment, never both, so
  an image is a message of its own, sent just before the text.
- A **card** is a generic template with one element: a title and a subtitle of at most 80
  characters each, the image (optional), up to 3 link buttons (titles at most 20) and the
  first link as what a tap on the card opens. It replaces the text message.

Both go only to a person's IGSID, inside the 24-hour window a tap or a DM opened: a
comment's private reply carries text or a button template only, so there the campaign's text
(with its buttons) goes out, as it does when Meta refuses the card.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app.campaigns.message_format import (
    BUTTON_TITLE_MAX_CHARS,
    DEFAULT_BUTTON_TITLE,
    MAX_BUTTONS,
    LinkButton,
    OutgoingMessage,
    cut_chars,
    render,
)

CARD_TEXT_MAX_CHARS = 80
IMAGE_MAX_BYTES = 8 * 1024 * 1024
IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif"})
# `OutgoingMessage.kind` (and `delivery_attempts.request_kind`) of these messages.
IMAGE_KIND = "image"
CARD_KIND = "card"


@dataclass(frozen=True, slots=True)
class Card:
    title: str
    subtitle: str = ""


def image_message(url: str) -> OutgoingMessage:
    """The image alone; its "text" (for the log and the inbox check) names it."""
    body = {"attachment": {"type": "image", "payload": {"url": url}}}
    return OutgoingMessage(IMAGE_KIND, body, f"[image] {url}")


def card_message(
    card: Card,
    buttons: Sequence[LinkButton],
    *,
    image_url: str | None,
    username: str | None,
) -> OutgoingMessage:
    """A generic template with one element: placeholders filled, cut to Meta's limits."""
    title = cut_chars(render(card.title, username=username, link="").strip(), CARD_TEXT_MAX_CHARS)
    subtitle = cut_chars(
        render(card.subtitle, username=username, link="").strip(), CARD_TEXT_MAX_CHARS
    )
    element: dict[str, object] = {"title": title or DEFAULT_BUTTON_TITLE}
    if subtitle:
        element["subtitle"] = subtitle
    if image_url:
        element["image_url"] = image_url
    links = list(buttons[:MAX_BUTTONS])
    if links:
        element["default_action"] = {"type": "web_url", "url": links[0].url}
        element["buttons"] = [
            {
                "type": "web_url",
                "url": button.url,
                "title": cut_chars(button.title, BUTTON_TITLE_MAX_CHARS) or DEFAULT_BUTTON_TITLE,
            }
            for button in links
        ]
    body = {
        "attachment": {
            "type": "template",
            "payload": {"template_type": "generic", "elements": [element]},
        }
    }
    shown = "\n".join(part for part in (str(element["title"]), subtitle) if part)
    return OutgoingMessage(CARD_KIND, body, shown)
