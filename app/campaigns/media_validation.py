"""The editor's checks of a DM's image and card (pure; the host's answer is `image_check`'s).

- the image URL: a full https:// link of at most 2000 characters (http:// only to the
  loopback interface, the development sandbox); its type and size are asked of its host when
  the campaign is saved;
- the card: a title (required when the card is on) and a subtitle of at most 80 characters
  each, `{username}` counted as 30 and no other placeholder; its buttons are the campaign's
  link buttons, so at most 3 (checked with them);
- where they can go: only in a DM after a tap or a DM, since a comment's private reply carries
  text and buttons only. A live comment campaign with an image or a card therefore needs the
  opening DM, the follow gate or the DM keyword trigger; a story campaign always answers by
  DM (the story reply or mention opened the window).
"""

from __future__ import annotations

import re
from typing import Protocol
from urllib.parse import urlsplit

from app.campaigns.media_message import CARD_TEXT_MAX_CHARS
from app.campaigns.message_format import render
from app.db.models import CampaignTrigger

MAX_IMAGE_URL = 2000
USERNAME_WORST_CASE = 30
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "[::1]", "::1"})
_PLACEHOLDER = re.compile(r"\{([^{}\s]{1,40})\}")


class MediaFields(Protocol):
    """The editor form's fields these checks read (`validation.CampaignInput`)."""

    @property
    def trigger(self) -> str: ...
    @property
    def dm_image_url(self) -> str: ...
    @property
    def card_enabled(self) -> bool: ...
    @property
    def card_title(self) -> str: ...
    @property
    def card_subtitle(self) -> str: ...
    @property
    def opening_dm_enabled(self) -> bool: ...
    @property
    def follow_gate_enabled(self) -> bool: ...
    @property
    def dm_trigger_enabled(self) -> bool: ...


def image_url_problem(url: str) -> str | None:
    """Why `url` cannot be the DM's image, as far as the link itself tells."""
    if len(url) > MAX_IMAGE_URL:
        return f"Image links are at most {MAX_IMAGE_URL} characters."
    try:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        _ = parts.port  # a port that is not one refuses the link too
    except ValueError:
        return "That image link is not a valid web address; copy it again from the browser."
    full = bool(parts.netloc) and " " not in url and not parts.username and not parts.password
    if parts.scheme == "https" and full:
        return None
    if parts.scheme == "http" and full and host in LOOPBACK_HOSTS:
        return None  # the development sandbox; `image_check` still decides whether allowed
    return "Use a full https:// link to the image, like https://example.com/cover.jpg."


def card_text_problem(text: str, what: str) -> str | None:
    unknown = sorted({f"{{{m}}}" for m in _PLACEHOLDER.findall(text)} - {"{username}"})
    if unknown:
        return f"Unknown placeholder {', '.join(unknown)} in the card's {what}. Use {{username}}."
    length = len(render(text, username="x" * USERNAME_WORST_CASE, link=""))
    if length > CARD_TEXT_MAX_CHARS:
        return (
            f"The card's {what} is at most {CARD_TEXT_MAX_CHARS} characters: this is {length} "
            "({username} counts as 30)."
        )
    return None


def check_media(form: MediaFields) -> dict[str, str]:
    """Errors of the image and card fields, by field."""
    errors: dict[str, str] = {}
    if form.dm_image_url and (problem := image_url_problem(form.dm_image_url)):
        errors["dm_image_url"] = problem
    if form.card_enabled and not form.card_title:
        errors["card_title"] = "Give the card a title (Instagram shows it in bold)."
    elif problem := card_text_problem(form.card_title, "title"):
        errors["card_title"] = problem
    if problem := card_text_problem(form.card_subtitle, "subtitle"):
        errors["card_subtitle"] = problem
    return errors


def media_activation_problems(form: MediaFields) -> dict[str, str]:
    """An image or a card with nowhere it may go."""
    if not (form.dm_image_url or form.card_enabled):
        return {}
    if form.trigger != CampaignTrigger.COMMENTS:
        return {}
    if form.opening_dm_enabled or form.follow_gate_enabled or form.dm_trigger_enabled:
        return {}
    field = "card_enabled" if form.card_enabled else "dm_image_url"
    return {
        field: (
            "Images and cards go only in a DM after a tap or a DM (Instagram's private reply "
            "to a comment carries text and buttons only): turn on the opening DM, the follow "
            "gate or the DM keyword trigger."
        )
    }
