"""Validation of a Send API ``message`` object against Instagram's limits.

Text is at most 1000 UTF-8 bytes; a button template has text of at most 640 characters and
1-3 buttons with titles of at most 20; a generic template has 1-10 elements with 80-character
titles; at most 13 quick replies, whose titles Instagram truncates to 20 characters. Breaking a
limit gives code 100, with subcode 2534015 (invalid message data) for template content.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from sandbox.errors import GraphError, invalid_param

TEXT_MAX_BYTES = 1000
BUTTON_TEXT_MAX = 640
BUTTON_TITLE_MAX = 20
BUTTONS_MAX = 3
QUICK_REPLIES_MAX = 13
QUICK_REPLY_TITLE_MAX = 20
ELEMENT_TEXT_MAX = 80
ELEMENTS_MAX = 10
PAYLOAD_MAX = 1000
INVALID_DATA = 2534015
MEDIA_TYPES = frozenset({"image", "video", "audio", "file"})


@dataclass(slots=True)
class CheckedMessage:
    text: str | None
    attachment: dict[str, Any] | None
    quick_replies: list[dict[str, Any]] | None


def _bad(message: str) -> GraphError:
    return invalid_param(message, subcode=INVALID_DATA)


def _is_url(value: object) -> bool:
    if not isinstance(value, str):
        return False
    parts = urlsplit(value)
    return parts.scheme in ("http", "https") and bool(parts.netloc)


def _text(value: object, where: str, *, limit: int, required: bool = True) -> str | None:
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise _bad(f"Param {where} must be a non-empty string")
    if len(value) > limit:
        raise _bad(f"Param {where} must be at most {limit} characters")
    return value


def check_button(button: object, where: str) -> dict[str, Any]:
    if not isinstance(button, dict):
        raise _bad(f"Param {where} must be an object")
    _text(button.get("title"), f"{where}[title]", limit=BUTTON_TITLE_MAX)
    kind = button.get("type")
    if kind == "postback":
        payload = button.get("payload")
        if not isinstance(payload, str) or not payload or len(payload) > PAYLOAD_MAX:
            raise _bad(f"Param {where}[payload] must be a string of 1 to {PAYLOAD_MAX} characters")
    elif kind == "web_url":
        if not _is_url(button.get("url")):
            raise _bad(f"Param {where}[url] must be a valid http(s) URL")
    else:
        raise _bad(f"Param {where}[type] must be one of {{web_url, postback}}")
    return button


def _buttons(value: object, where: str, *, minimum: int) -> None:
    if value is None and minimum == 0:
        return
    if not isinstance(value, list) or not minimum <= len(value) <= BUTTONS_MAX:
        raise _bad(f"Param {where} must be an array of {minimum} to {BUTTONS_MAX} buttons")
    for index, button in enumerate(value):
        check_button(button, f"{where}[{index}]")


def _template(payload: dict[str, Any]) -> None:
    where = "message[attachment][payload]"
    kind = payload.get("template_type")
    if kind == "button":
        _text(payload.get("text"), f"{where}[text]", limit=BUTTON_TEXT_MAX)
        _buttons(payload.get("buttons"), f"{where}[buttons]", minimum=1)
    elif kind == "generic":
        elements = payload.get("elements")
        if not isinstance(elements, list) or not 1 <= len(elements) <= ELEMENTS_MAX:
            raise _bad(f"Param {where}[elements] must be an array of 1 to {ELEMENTS_MAX} elements")
        for index, element in enumerate(elements):
            at = f"{where}[elements][{index}]"
            if not isinstance(element, dict):
                raise _bad(f"Param {at} must be an object")
            _text(element.get("title"), f"{at}[title]", limit=ELEMENT_TEXT_MAX)
            _text(
                element.get("subtitle"), f"{at}[subtitle]", limit=ELEMENT_TEXT_MAX, required=False
            )
            if "image_url" in element and not _is_url(element["image_url"]):
                raise _bad(f"Param {at}[image_url] must be a valid http(s) URL")
            _buttons(element.get("buttons"), f"{at}[buttons]", minimum=0)
    else:
        raise _bad(f"Param {where}[template_type] must be one of {{button, generic}}")


def _attachment(value: object, owns_media: Callable[[str], bool]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _bad("Param message[attachment] must be an object")
    kind = value.get("type")
    payload = value.get("payload")
    if kind == "template":
        if not isinstance(payload, dict):
            raise _bad("Param message[attachment][payload] must be an object")
        _template(payload)
    elif kind in MEDIA_TYPES:
        if not isinstance(payload, dict) or not (
            _is_url(payload.get("url")) or isinstance(payload.get("attachment_id"), str)
        ):
            raise _bad("Param message[attachment][payload][url] must be a valid http(s) URL")
    elif kind == "MEDIA_SHARE":
        media_id = payload.get("id") if isinstance(payload, dict) else None
        if not isinstance(media_id, str) or not owns_media(media_id):
            raise _bad("Param message[attachment][payload][id] must be a media of this account")
    elif kind != "like_heart":
        raise _bad(
            "Param message[attachment][type] must be one of "
            "{template, image, video, audio, file, like_heart, MEDIA_SHARE}"
        )
    return value


def _quick_replies(value: object) -> list[dict[str, Any]]:
    if not isinstance(value, list) or not 1 <= len(value) <= QUICK_REPLIES_MAX:
        raise invalid_param(
            f"Param message[quick_replies] must be an array of 1 to {QUICK_REPLIES_MAX} elements"
        )
    checked: list[dict[str, Any]] = []
    for index, item in enumerate(value):
        where = f"message[quick_replies][{index}]"
        if not isinstance(item, dict):
            raise invalid_param(f"Param {where} must be an object")
        kind = item.get("content_type", "text")
        if kind in ("user_phone_number", "user_email"):
            checked.append({"content_type": kind})
            continue
        if kind != "text":
            raise invalid_param(f"Param {where}[content_type] is not a supported type")
        title, payload = item.get("title"), item.get("payload")
        if not isinstance(title, str) or not title.strip():
            raise invalid_param(f"Param {where}[title] must be a non-empty string")
        if not isinstance(payload, str) or not payload or len(payload) > PAYLOAD_MAX:
            raise invalid_param(f"Param {where}[payload] must be a string of 1 to 1000 characters")
        # Instagram cuts long quick-reply titles instead of refusing them.
        checked.append(
            {"content_type": "text", "title": title[:QUICK_REPLY_TITLE_MAX], "payload": payload}
        )
    return checked


def check_message(message: object, owns_media: Callable[[str], bool]) -> CheckedMessage:
    if message is None:
        raise invalid_param("The parameter message is required")
    if not isinstance(message, dict):
        raise invalid_param("Param message must be a JSON object")
    text, attachment = message.get("text"), message.get("attachment")
    if text is not None and attachment is not None:
        raise _bad("Only one of message[text] or message[attachment] can be specified")
    if text is None and attachment is None:
        raise _bad("Param message must contain text or an attachment")
    if text is not None:
        if not isinstance(text, str) or not text.strip():
            raise invalid_param("Param message[text] must be a non-empty UTF-8 encoded string")
        if len(text.encode("utf-8")) > TEXT_MAX_BYTES:
            raise invalid_param(
                f"Length of param message[text] must be less than or equal to {TEXT_MAX_BYTES}"
            )
    checked_attachment = _attachment(attachment, owns_media) if attachment is not None else None
    quick = message.get("quick_replies")
    return CheckedMessage(
        text=text if isinstance(text, str) else None,
        attachment=checked_attachment,
        quick_replies=_quick_replies(quick) if quick is not None else None,
    )
