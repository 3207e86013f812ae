"""The editor preview's image and card: what a DM after a tap or a DM shows (pure).

Drawn from the form as typed, with each field's problem; the image is shown only for a link
the campaign could be saved with (the preview never loads a javascript: or data: URL), and
the card's buttons link only where a button's URL passes.
"""

from __future__ import annotations

from typing import Any

from app.campaigns.media_message import Card, card_message
from app.campaigns.media_validation import (
    card_text_problem,
    image_url_problem,
    media_activation_problems,
)
from app.campaigns.message_format import buttons_of
from app.campaigns.validation import CampaignInput, link_problem


def media_preview(form: CampaignInput, *, username: str) -> dict[str, Any] | None:
    """None when the campaign has neither an image nor a card."""
    if not (form.dm_image_url or form.card_enabled):
        return None
    image_error = image_url_problem(form.dm_image_url) if form.dm_image_url else None
    image = form.dm_image_url if form.dm_image_url and image_error is None else None
    card: dict[str, Any] | None = None
    if form.card_enabled:
        buttons = buttons_of([{"title": b.title, "url": b.url} for b in form.filled_buttons])
        message = card_message(
            Card(form.card_title, form.card_subtitle),
            buttons,
            image_url=image,
            username=username,
        )
        [element] = message.body["attachment"]["payload"]["elements"]
        card = {
            "title": element["title"] if form.card_title else "",
            "subtitle": element.get("subtitle", ""),
            "buttons": [
                {**b, "href": None if link_problem(b["url"]) else b["url"]}
                for b in element.get("buttons", [])
            ],
            "title_error": card_text_problem(form.card_title, "title"),
            "subtitle_error": card_text_problem(form.card_subtitle, "subtitle"),
        }
    nowhere = media_activation_problems(form)
    return {
        "image": image,
        "image_error": image_error,
        "card": card,
        "nowhere": next(iter(nowhere.values()), None),
    }
