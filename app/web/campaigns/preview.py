"""The editor's live DM preview: what the fan would receive, redrawn while someone types.

`preview_context` turns the form as typed into the bubbles of the conversation (the opening
DM and the follow prompt before the link when the two-step flow is on, then the link, then
the follow-up), each with its length and its problem, if any; the editor page draws it, and
`POST /campaigns/preview` redraws it alone. It reads nothing and writes nothing.
"""

from __future__ import annotations

from typing import Any

from litestar import post
from litestar.di import NamedDependency
from litestar.plugins.htmx import HTMXRequest
from litestar.response import Template

from app.auth.current import Viewer
from app.campaigns.message_format import build_message, buttons_of, render
from app.campaigns.validation import (
    MAX_DELAY_MINUTES,
    CampaignInput,
    check_button_message,
    check_dm_text,
    check_follow_up_text,
    link_problem,
    parse_campaign_form,
)
from app.db.bounds import parse_int
from app.delivery.content import compose
from app.delivery.content.compose import CampaignTexts, Content
from app.delivery.content.follow_ups import render_follow_up
from app.web.campaigns.common import NO_STORE
from app.web.campaigns.media_preview import media_preview

PREVIEW_USERNAME = "jane.doe"


@post("/preview", name="campaign_preview", status_code=200)
async def preview(request: HTMXRequest, viewer: NamedDependency[Viewer]) -> Template:
    form = parse_campaign_form(await request.form())
    return Template(
        "campaigns/_preview.html",
        context={"preview": preview_context(form)},
        headers=NO_STORE,
    )


def preview_context(form: CampaignInput) -> dict[str, Any]:
    buttons = buttons_of([{"title": b.title, "url": b.url} for b in form.filled_buttons])
    message = build_message(form.dm_text, buttons, username=PREVIEW_USERNAME)
    attachment = message.body.get("attachment", {})
    payload = attachment.get("payload", {}) if isinstance(attachment, dict) else {}
    text = message.text if form.dm_text.strip() else ""
    # Count what was typed (placeholders filled in), not the copy the sender would cut to fit.
    typed = render(
        form.dm_text.replace("{link}", "") if buttons else form.dm_text,
        username=PREVIEW_USERNAME,
        link=None,
    ).strip()
    steps = _two_step_preview(form)
    return {
        "empty": not form.dm_text.strip(),
        "kind": message.kind,
        "text": text,
        "buttons": [
            # What was typed is shown, but only a link the campaign could be saved with is
            # clickable: the preview must not open javascript: or any other scheme.
            {**button, "href": None if link_problem(str(button.get("url", ""))) else button["url"]}
            for button in (payload.get("buttons", []) if message.kind == "template" else [])
        ],
        "bytes": len(typed.encode("utf-8")),
        "chars": len(typed),
        "error": check_dm_text(form),
        "username": PREVIEW_USERNAME,
        "steps": steps,
        "reveal_label": (
            ("After the tap, once they follow you" if form.follow_gate_enabled else "After the tap")
            + ": the link"
            if steps
            else None
        ),
        "follow_up": _follow_up_preview(form),
        "media": media_preview(form, username=PREVIEW_USERNAME),
    }


def _two_step_preview(form: CampaignInput) -> list[dict[str, Any]]:
    """The bubbles before the link: the opening DM and/or the follow prompt, each with its
    postback button (order: opening DM → follow gate → link)."""
    texts = CampaignTexts(
        campaign_id=0,
        dm_text=form.dm_text,
        buttons=[],
        opening_dm_text=form.opening_dm_text,
        opening_dm_button_title=form.opening_dm_button_title,
        follow_gate=form.follow_gate_enabled,
        follow_prompt_text=form.follow_prompt_text,
        follow_prompt_button_title=form.follow_prompt_button_title,
    )
    steps: list[dict[str, Any]] = []
    if form.opening_dm_enabled:
        content = compose.opening_dm(texts, username=PREVIEW_USERNAME)
        steps.append(
            _step(
                "opening",
                "The private reply to the comment",
                content,
                check_button_message(form.opening_dm_text),
            )
        )
    if form.follow_gate_enabled:
        when = "After the tap, if" if steps else "The private reply to the comment, if"
        content = compose.follow_prompt(texts, username=PREVIEW_USERNAME)
        steps.append(
            _step(
                "prompt",
                f"{when} @{PREVIEW_USERNAME} does not follow you yet",
                content,
                check_button_message(form.follow_prompt_text),
            )
        )
    return steps


def _step(name: str, label: str, content: Content, error: str | None) -> dict[str, Any]:
    attachment = content.message.body["attachment"]
    [button] = attachment["payload"]["buttons"]
    return {
        "name": name,
        "label": label,
        "text": content.message.text,
        "button": button["title"],
        "chars": len(content.message.text),
        "error": error,
    }


def _follow_up_preview(form: CampaignInput) -> dict[str, Any] | None:
    if not form.follow_up_enabled:
        return None
    delay = parse_int(form.follow_up_delay_minutes, low=0, high=MAX_DELAY_MINUTES) or 0
    buttons = [{"title": b.title, "url": b.url} for b in form.filled_buttons]
    return {
        "text": render_follow_up(form.follow_up_text, username=PREVIEW_USERNAME, buttons=buttons),
        "delay": delay,
        "error": check_follow_up_text(form),
    }
