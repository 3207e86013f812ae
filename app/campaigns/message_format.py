"""The private reply a campaign sends: placeholders rendered, Meta's size limits respected.

`{username}` becomes the commenter's username (or "there"), `{link}` the first button's URL.
With link buttons the message goes out as a button template (text ≤ 640 characters, 1-3
buttons, titles ≤ 20 characters); without them as plain text (≤ 1000 bytes of UTF-8). The
plain-text fallback, used only when Meta rejects the template itself, carries the links inline.
`postback_message` is the one-button template of the two-step DMs (opening DM, follow prompt):
its button sends a payload back instead of opening a link. The campaign editor checks against
the same limits and `LinkButton` (`validation`), so what it accepts is what gets sent.

Cuts never split a user-perceived character (an extended grapheme cluster): an emoji with its
skin tone or ZWJ sequence, a flag, a letter with its combining accents, an Indic conjunct, a
Thai or Lao vowel sign stay whole or go together.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import regex

TEXT_MAX_BYTES = 1000
TEMPLATE_TEXT_MAX_CHARS = 640
BUTTON_TITLE_MAX_CHARS = 20
MAX_BUTTONS = 3
DEFAULT_BUTTON_TITLE = "Open link"
DEFAULT_TEMPLATE_TEXT = "Here's your link:"
DEFAULT_USERNAME = "there"

_SPACES = re.compile(r"[ \t]{2,}")
_SPACE_BEFORE_PUNCT = re.compile(r"[ \t]+([.,!?:;])")


@dataclass(frozen=True, slots=True)
class LinkButton:
    title: str
    url: str


@dataclass(frozen=True, slots=True)
class OutgoingMessage:
    """A Send API `message` object and the text a person will read (for inbox matching)."""

    kind: str  # "template" or "text"
    body: dict[str, Any]
    text: str

    def private_reply(self, comment_id: str) -> dict[str, Any]:
        return {"recipient": {"comment_id": comment_id}, "message": self.body}

    def direct(self, igsid: str) -> dict[str, Any]:
        return {"recipient": {"id": igsid}, "message": self.body}


def buttons_of(raw: Sequence[Mapping[str, Any]] | None) -> list[LinkButton]:
    """The campaign's stored buttons (JSON), cleaned: at most 3, each with a URL."""
    buttons: list[LinkButton] = []
    for item in raw or ():
        url = str(item.get("url") or "").strip()
        if url:
            buttons.append(LinkButton(title=str(item.get("title") or "").strip(), url=url))
    return buttons[:MAX_BUTTONS]


def render(text: str, *, username: str | None, link: str | None) -> str:
    """Fill `{username}` and `{link}`; other braces are left as the creator wrote them."""
    name = (username or "").strip().lstrip("@") or DEFAULT_USERNAME
    return text.replace("{username}", name).replace("{link}", link or "")


def build_message(
    text: str, buttons: Sequence[LinkButton], *, username: str | None
) -> OutgoingMessage:
    """The message to send first: a button template when there are buttons, else text."""
    if not buttons:
        return text_message(text, buttons, username=username)
    body_text = _tidy(render(text, username=username, link=""))
    body_text = cut_chars(body_text or DEFAULT_TEMPLATE_TEXT, TEMPLATE_TEXT_MAX_CHARS)
    payload_buttons = [
        {
            "type": "web_url",
            "url": button.url,
            "title": cut_chars(button.title, BUTTON_TITLE_MAX_CHARS) or DEFAULT_BUTTON_TITLE,
        }
        for button in buttons[:MAX_BUTTONS]
    ]
    body = {
        "attachment": {
            "type": "template",
            "payload": {"template_type": "button", "text": body_text, "buttons": payload_buttons},
        }
    }
    return OutgoingMessage("template", body, body_text)


def postback_message(
    text: str,
    *,
    title: str,
    payload: str,
    username: str | None,
    default_text: str,
    default_title: str,
) -> OutgoingMessage:
    """A button template with one postback button (`{link}` has no place here: dropped)."""
    body_text = _tidy(render(text, username=username, link=""))
    body_text = cut_chars(body_text or default_text, TEMPLATE_TEXT_MAX_CHARS)
    button = {
        "type": "postback",
        "title": cut_chars(title.strip(), BUTTON_TITLE_MAX_CHARS) or default_title,
        "payload": payload,
    }
    body = {
        "attachment": {
            "type": "template",
            "payload": {"template_type": "button", "text": body_text, "buttons": [button]},
        }
    }
    return OutgoingMessage("template", body, body_text)


def text_message(
    text: str, buttons: Sequence[LinkButton], *, username: str | None
) -> OutgoingMessage:
    """Plain text: the primary link inline (appended if the text has no `{link}`), the others
    on lines of their own."""
    primary = buttons[0].url if buttons else None
    rendered = render(text, username=username, link=primary).strip()
    extra = [b.url for b in buttons[1:]]
    if primary and "{link}" not in text:
        extra.insert(0, primary)
    full = "\n".join([rendered, *extra]) if rendered else "\n".join(extra)
    final = cut_bytes(full.strip() or DEFAULT_TEMPLATE_TEXT, TEXT_MAX_BYTES)
    return OutgoingMessage("text", {"text": final}, final)


def _tidy(text: str) -> str:
    """Close the gap a removed `{link}` leaves behind."""
    lines = [
        _SPACE_BEFORE_PUNCT.sub(r"\1", _SPACES.sub(" ", line)).strip() for line in text.split("\n")
    ]
    return "\n".join(lines).strip()


# --- cutting on grapheme boundaries ------------------------------------------------------

# An extended grapheme cluster (Unicode's UAX #29, as the `regex` package implements it).
_GRAPHEME = regex.compile(r"\X")


def graphemes(text: str) -> Iterator[str]:
    """Split text into user-perceived characters (extended grapheme clusters)."""
    for match in _GRAPHEME.finditer(text):
        yield match.group()


def cut_chars(text: str, limit: int) -> str:
    """At most `limit` code points (how Meta counts), without splitting a grapheme."""
    if len(text) <= limit:
        return text
    kept: list[str] = []
    used = 0
    for cluster in graphemes(text):
        if used + len(cluster) > limit:
            break
        kept.append(cluster)
        used += len(cluster)
    return "".join(kept).rstrip()


def cut_bytes(text: str, limit: int) -> str:
    """At most `limit` bytes of UTF-8, without splitting a grapheme."""
    if len(text.encode("utf-8")) <= limit:
        return text
    kept: list[str] = []
    used = 0
    for cluster in graphemes(text):
        size = len(cluster.encode("utf-8"))
        if used + size > limit:
            break
        kept.append(cluster)
        used += size
    return "".join(kept).rstrip()
