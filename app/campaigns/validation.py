"""Reading and checking the campaign editor's form against Meta's limits; pure functions.

Limits (Meta's, from `message_format`, which the sender cuts to as well; the rest are ours):
- a text DM is at most 1000 **bytes** of UTF-8 (an emoji is 4 bytes, "é" 2);
- with link buttons the DM goes out as a button template: its text at most 640 characters,
  1–3 buttons, each title at most 20 characters and an https URL;
- at most 10 keywords (and 10 excluded keywords) of at most 50 characters;
- up to 10 public reply variants; priority −1000..1000;
- two-step DMs: the opening DM's and the follow prompt's text at most 640 characters (each is
  a button template) with a button title of at most 20; they take `{username}` but not
  `{link}` (the link is what the tap earns);
- the follow-up: at most 1000 bytes of UTF-8 (plain text), sent 0–1440 minutes after the tap
  or DM, within Meta's 24-hour window.

A DM's image and card are checked by `media_validation` (and the image's host asked by
`image_check`, from the controller, since that is not pure).

Placeholders are checked at their worst case, so a saved campaign cannot become too long at
send time: `{username}` counts as 30 characters (Instagram's longest username) and `{link}`
as the first button's URL (in a button template `{link}` is dropped from the text, since the
button carries the link).

A campaign answers comments on posts, replies to the account's stories (every story, or one
chosen story while it is live) or mentions of the account in someone's story (`trigger`). A
story campaign has no post and no public reply (there is no comment to reply under) and no DM
keyword trigger; a story-mention campaign has no keywords (a mention carries no text) and
thanks each person once. The follow gate works for both as for the DM keyword trigger (the
opening DM is a comment's step: a reply or mention already is a message). A reply or mention
opens the 24-hour window, so a follow-up may follow it.

`parse_campaign_form` keeps what the person typed, valid or not, so the form can be shown
again with the errors next to the fields; `check_campaign` returns those errors by field.
A draft may be incomplete; activating (or saving an active campaign) also needs a post for
post scope, keywords unless "any comment", and the DM text, plus the texts and button titles
of the two-step steps that are on. A follow-up only ever goes out after a tap or a DM, so it
needs the opening DM, the follow gate or the DM keyword trigger; the DM trigger needs keywords.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol
from urllib.parse import urlsplit

from app.campaigns.matching import keyword_is_matchable
from app.campaigns.media_validation import check_media, media_activation_problems
from app.campaigns.message_format import (
    BUTTON_TITLE_MAX_CHARS,
    MAX_BUTTONS,
    TEMPLATE_TEXT_MAX_CHARS,
    TEXT_MAX_BYTES,
    LinkButton,
    render,
)
from app.db.bounds import parse_id, parse_int
from app.db.models import CampaignScope, CampaignTrigger, MatchMode
from app.instagram.payload_fields import parse_graph_time

MAX_NAME = 100
MAX_URL = 2000
MAX_KEYWORDS = 10
MAX_KEYWORD = 50
MAX_REPLIES = 10
MAX_REPLY = 2200  # Instagram's comment length limit
MAX_CAPTION = 2200
PRIORITY_RANGE = (-1000, 1000)
# A follow-up waits at most 24 hours: the messaging window the person opened.
MAX_DELAY_MINUTES = 1440
USERNAME_WORST_CASE = 30
# Any one field as read from a form: past every limit above, so a longer value still gets its
# field's error, and short enough that checking and showing it again is cheap.
MAX_FIELD_CHARS = 32_000
PLACEHOLDERS = ("{username}", "{link}")
_PLACEHOLDER = re.compile(r"\{([^{}\s]{1,40})\}")
_MEDIA_ID = re.compile(r"^[0-9]{1,32}$")
# A story is live for 24 hours after it is posted.
STORY_LIFETIME = timedelta(hours=24)
ANY_STORY = "any_story"
ONE_STORY = "one_story"


class FormData(Protocol):
    """A submitted form: one value per name, or all of them (Litestar's `FormMultiDict`)."""

    def get(self, key: str, /) -> Any: ...
    def getall(self, key: str, default: list[Any]) -> list[Any]: ...


@dataclass(slots=True)
class CampaignInput:
    """What the editor sent, as typed (strings), plus the parsed values the checks use."""

    name: str = ""
    account_id: str = ""
    trigger: str = CampaignTrigger.COMMENTS.value
    # Story replies: every story, or one story (its id and when it was posted).
    story_scope: str = ANY_STORY
    story_id: str = ""
    story_time: str = ""
    scope: str = CampaignScope.POST.value
    media_id: str = ""
    media_caption: str = ""
    match_mode: str = MatchMode.WHOLE_WORD.value
    keywords: list[str] = field(default_factory=list)
    excluded_keywords: list[str] = field(default_factory=list)
    dm_text: str = ""
    # Exactly MAX_BUTTONS rows, blank rows included, so the form shows them in place.
    buttons: list[LinkButton] = field(
        default_factory=lambda: [LinkButton("", "") for _ in range(MAX_BUTTONS)]
    )
    # Filled button rows past MAX_BUTTONS in the request (refused, never silently dropped).
    extra_buttons: int = 0
    public_replies_text: str = ""
    # Post the public reply whatever became of the DM (a reply that does not mention it).
    public_reply_always: bool = False
    # Skip the public reply while private replies wait for the hourly limit (a surge).
    public_reply_skip_in_backlog: bool = False
    priority: str = "0"
    once_per_person: bool = True
    utm_enabled: bool = False
    # Two-step DMs, follow gate, DM keyword trigger and follow-up (kept while switched off).
    opening_dm_enabled: bool = False
    opening_dm_text: str = ""
    opening_dm_button_title: str = ""
    follow_gate_enabled: bool = False
    follow_prompt_text: str = ""
    follow_prompt_button_title: str = ""
    dm_trigger_enabled: bool = False
    follow_up_enabled: bool = False
    follow_up_text: str = ""
    follow_up_delay_minutes: str = "60"
    # An image before the DM and a card instead of it, in DMs after a tap or a DM
    # (`media_validation`).
    dm_image_url: str = ""
    card_enabled: bool = False
    card_title: str = ""
    card_subtitle: str = ""

    @property
    def on_comments(self) -> bool:
        return self.trigger == CampaignTrigger.COMMENTS

    @property
    def on_mentions(self) -> bool:
        return self.trigger == CampaignTrigger.STORY_MENTIONS

    @property
    def one_story(self) -> bool:
        return self.trigger == CampaignTrigger.STORY_REPLIES and self.story_scope == ONE_STORY

    @property
    def story_expires_at(self) -> datetime | None:
        posted = parse_graph_time(self.story_time) if self.one_story else None
        return posted + STORY_LIFETIME if posted is not None else None

    @property
    def two_step_on(self) -> bool:
        """Something in the editor's "Two-step and follow-up" section is switched on."""
        return (
            self.opening_dm_enabled
            or self.follow_gate_enabled
            or self.dm_trigger_enabled
            or self.follow_up_enabled
        )

    @property
    def filled_buttons(self) -> list[LinkButton]:
        return [b for b in self.buttons if b.title or b.url]

    @property
    def public_replies(self) -> list[str]:
        return [line.strip() for line in self.public_replies_text.splitlines() if line.strip()]

    def column_values(self) -> dict[str, Any]:
        """The campaign columns, for a form that passed `check_campaign`."""
        trigger = CampaignTrigger(self.trigger)
        comments = trigger is CampaignTrigger.COMMENTS
        # A story campaign watches no post; `any_post` is never read for it.
        scope = CampaignScope(self.scope) if comments else CampaignScope.ANY_POST
        replies = self.public_replies if comments else []
        mentions = trigger is CampaignTrigger.STORY_MENTIONS
        return {
            "name": self.name,
            "account_id": int(self.account_id),
            "trigger": trigger,
            "story_id": (self.story_id or None) if self.one_story else None,
            "story_expires_at": self.story_expires_at,
            "scope": scope,
            "media_id": (self.media_id or None) if scope is CampaignScope.POST else None,
            "media_caption": (self.media_caption or None) if scope is CampaignScope.POST else None,
            "match_mode": MatchMode.ANY_COMMENT if mentions else MatchMode(self.match_mode),
            "keywords": [] if mentions else self.keywords,
            "excluded_keywords": [] if mentions else self.excluded_keywords,
            "dm_text": self.dm_text,
            "buttons": [{"title": b.title, "url": b.url} for b in self.filled_buttons],
            "public_reply_enabled": bool(replies),
            "public_replies": replies,
            "public_reply_after_dm": not self.public_reply_always,
            "public_reply_skip_in_backlog": self.public_reply_skip_in_backlog,
            "priority": int(self.priority),
            # A story mention is thanked once per person, however often they mention you.
            "once_per_person": self.once_per_person or mentions,
            "utm_enabled": self.utm_enabled,
            "opening_dm_enabled": self.opening_dm_enabled and comments,
            "opening_dm_text": self.opening_dm_text or None,
            "opening_dm_button_title": self.opening_dm_button_title or None,
            "follow_gate_enabled": self.follow_gate_enabled,
            "follow_prompt_text": self.follow_prompt_text or None,
            "follow_prompt_button_title": self.follow_prompt_button_title or None,
            "dm_trigger_enabled": self.dm_trigger_enabled and comments,
            "follow_up_enabled": self.follow_up_enabled,
            "follow_up_text": self.follow_up_text or None,
            "follow_up_delay_minutes": int(self.follow_up_delay_minutes),
            "dm_image_url": self.dm_image_url or None,
            "card_enabled": self.card_enabled,
            "card_title": self.card_title or None,
            "card_subtitle": self.card_subtitle or None,
        }


def _text(form: FormData, name: str) -> str:
    value = form.get(name)
    return value[:MAX_FIELD_CHARS].strip() if isinstance(value, str) else ""


def split_keywords(values: Iterable[str]) -> list[str]:
    """Chips and typed entries ("guide, link") → distinct keywords, first spelling kept.

    Reading stops one keyword past `MAX_KEYWORDS`, and each keyword is cut one character past
    `MAX_KEYWORD`: enough for `check_keywords` to name the problem, however much was sent.
    """
    seen: set[str] = set()
    keywords: list[str] = []
    for value in values:
        for part in value[:MAX_FIELD_CHARS].split(",", MAX_KEYWORDS * 4):
            keyword = " ".join(part.split())[: MAX_KEYWORD + 1]
            if keyword and keyword.casefold() not in seen:
                seen.add(keyword.casefold())
                keywords.append(keyword)
                if len(keywords) > MAX_KEYWORDS:
                    return keywords
    return keywords


def _multiline(form: FormData, name: str) -> str:
    """A message text: its own line breaks and inner spacing kept, trailing blanks dropped."""
    value = form.get(name)
    return value[:MAX_FIELD_CHARS].replace("\r\n", "\n").rstrip() if isinstance(value, str) else ""


def _checked(form: FormData, name: str) -> bool:
    return form.get(name) in {"on", "1", "true"}


def parse_campaign_form(form: FormData) -> CampaignInput:
    media_id = _text(form, "media_id")
    story_id = _text(form, "story_id")
    return CampaignInput(
        name=" ".join(_text(form, "name").split()),
        account_id=_text(form, "account_id"),
        trigger=_text(form, "trigger") or CampaignTrigger.COMMENTS.value,
        story_scope=_text(form, "story_scope") or ANY_STORY,
        story_id=story_id,
        story_time=_text(form, f"story_time_{story_id}") or _text(form, "story_time"),
        scope=_text(form, "scope") or CampaignScope.POST.value,
        media_id=media_id,
        media_caption=_text(form, f"media_caption_{media_id}") or _text(form, "media_caption"),
        match_mode=_text(form, "match_mode") or MatchMode.WHOLE_WORD.value,
        keywords=keyword_chips(form, "keywords"),
        excluded_keywords=keyword_chips(form, "excluded_keywords"),
        dm_text=_multiline(form, "dm_text"),
        buttons=[
            LinkButton(_text(form, f"button_title_{i}"), _text(form, f"button_url_{i}"))
            for i in range(1, MAX_BUTTONS + 1)
        ],
        extra_buttons=sum(
            1
            for i in range(MAX_BUTTONS + 1, MAX_BUTTONS + 8)
            if _text(form, f"button_title_{i}") or _text(form, f"button_url_{i}")
        ),
        public_replies_text=_multiline(form, "public_replies"),
        public_reply_always=_checked(form, "public_reply_always"),
        public_reply_skip_in_backlog=_checked(form, "public_reply_skip_in_backlog"),
        priority=_text(form, "priority") or "0",
        once_per_person=_checked(form, "once_per_person"),
        utm_enabled=_checked(form, "utm_enabled"),
        opening_dm_enabled=_checked(form, "opening_dm_enabled"),
        opening_dm_text=_multiline(form, "opening_dm_text"),
        opening_dm_button_title=_text(form, "opening_dm_button_title"),
        follow_gate_enabled=_checked(form, "follow_gate_enabled"),
        follow_prompt_text=_multiline(form, "follow_prompt_text"),
        follow_prompt_button_title=_text(form, "follow_prompt_button_title"),
        dm_trigger_enabled=_checked(form, "dm_trigger_enabled"),
        follow_up_enabled=_checked(form, "follow_up_enabled"),
        follow_up_text=_multiline(form, "follow_up_text"),
        follow_up_delay_minutes=_text(form, "follow_up_delay_minutes") or "0",
        dm_image_url=_text(form, "dm_image_url"),
        card_enabled=_checked(form, "card_enabled"),
        card_title=_text(form, "card_title"),
        card_subtitle=_text(form, "card_subtitle"),
    )


def keyword_chips(form: FormData, field: str) -> list[str]:
    """A keyword field: its chips plus whatever is still typed in its entry box."""
    chips = [v for v in form.getall(field, [])[: MAX_KEYWORDS + 1] if isinstance(v, str)]
    return split_keywords([*chips, _text(form, f"{field}_entry")])


def utf8_bytes(text: str) -> int:
    return len(text.encode("utf-8"))


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def worst_case_text(text: str, *, link: str | None) -> str:
    """The DM text as long as it can get once the sender fills in the placeholders."""
    return render(text, username="x" * USERNAME_WORST_CASE, link=link)


def _unknown_placeholders(text: str, allowed: tuple[str, ...]) -> str | None:
    unknown = sorted({f"{{{m}}}" for m in _PLACEHOLDER.findall(text)} - set(allowed))
    if not unknown:
        return None
    return f"Unknown placeholder {', '.join(unknown)}. Use {' or '.join(allowed)}."


def _placeholder_problem(text: str, buttons: list[LinkButton], *, where: str) -> str | None:
    """Unknown placeholders, or `{link}` with no link button to fill it."""
    unknown = _unknown_placeholders(text, PLACEHOLDERS)
    if unknown:
        return unknown
    if "{link}" in text and not buttons:
        return f"{{link}} needs a link: add a button with a URL {where}, or remove {{link}}."
    return None


def check_dm_text(input_: CampaignInput) -> str | None:
    """The DM text's error, if any (also used by the live preview)."""
    text = input_.dm_text
    buttons = input_.filled_buttons
    problem = _placeholder_problem(text, buttons, where="below")
    if problem:
        return problem
    if buttons:
        # Sent as a button template: the buttons carry the links, `{link}` leaves the text.
        return _too_long_for_template(text.replace("{link}", ""), "a message with buttons")
    return _too_long_for_text(text, link=None)


def _too_long_for_template(text: str, what: str) -> str | None:
    length = len(worst_case_text(text, link=None))
    if length <= TEMPLATE_TEXT_MAX_CHARS:
        return None
    return (
        f"Too long for {what}: {length} of {TEMPLATE_TEXT_MAX_CHARS} characters "
        "({username} counts as 30)."
    )


def _too_long_for_text(text: str, *, link: str | None) -> str | None:
    size = utf8_bytes(worst_case_text(text, link=link))
    if size <= TEXT_MAX_BYTES:
        return None
    return (
        f"Too long for Instagram: {size} of {TEXT_MAX_BYTES} bytes "
        "(emoji take 4 bytes, accented letters 2; {username} counts as 30)."
    )


def check_button_message(text: str) -> str | None:
    """The opening DM's or follow prompt's text: a button template that must not give the
    link away before the tap (also used by the live preview)."""
    if "{link}" in text:
        return "{link} would give the link away before the tap: the link comes after it."
    problem = _unknown_placeholders(text, ("{username}",))
    return problem or _too_long_for_template(text, "a message with a button")


def check_follow_up_text(input_: CampaignInput) -> str | None:
    text = input_.follow_up_text
    buttons = input_.filled_buttons
    problem = _placeholder_problem(text, buttons, where="above")
    if problem:
        return problem
    return _too_long_for_text(text, link=buttons[0].url if buttons else None)


def _check_button_title(title: str) -> str | None:
    if len(title) > BUTTON_TITLE_MAX_CHARS:
        return f"Button titles are at most {BUTTON_TITLE_MAX_CHARS} characters ({len(title)})."
    return None


def check_two_step(input_: CampaignInput) -> dict[str, str]:
    """Errors of the "Two-step and follow-up" fields, by field."""
    errors: dict[str, str] = {}
    for text_field, title_field in (
        ("opening_dm_text", "opening_dm_button_title"),
        ("follow_prompt_text", "follow_prompt_button_title"),
    ):
        problem = check_button_message(getattr(input_, text_field))
        if problem:
            errors[text_field] = problem
        problem = _check_button_title(getattr(input_, title_field))
        if problem:
            errors[title_field] = problem
    problem = check_follow_up_text(input_)
    if problem:
        errors["follow_up_text"] = problem
    if parse_int(input_.follow_up_delay_minutes, low=0, high=MAX_DELAY_MINUTES) is None:
        errors["follow_up_delay_minutes"] = (
            f"The delay is a whole number of minutes from 0 to {MAX_DELAY_MINUTES} (24 hours)."
        )
    if (
        input_.on_comments
        and input_.dm_trigger_enabled
        and input_.match_mode == MatchMode.ANY_COMMENT
    ):
        errors["dm_trigger_enabled"] = (
            "The DM keyword trigger needs keywords: with “any comment” it would answer every "
            "message anyone sends you."
        )
    return errors


def check_keywords(keywords: list[str], label: str) -> str | None:
    if len(keywords) > MAX_KEYWORDS:
        return f"At most {MAX_KEYWORDS} {label}; remove some."
    too_long = [k for k in keywords if len(k) > MAX_KEYWORD]
    if too_long:
        return f"“{too_long[0][:20]}…” is longer than {MAX_KEYWORD} characters."
    unmatchable = [k for k in keywords if not keyword_is_matchable(k)]
    if unmatchable:
        return (
            f"“{unmatchable[0]}” has no letters, digits or emoji, so no comment can ever match it."
        )
    return None


def _check_button(button: LinkButton) -> str | None:
    if not button.title:
        return "Give the button a title."
    if problem := _check_button_title(button.title):
        return problem
    return link_problem(button.url)


def link_problem(url: str) -> str | None:
    """Why `url` cannot be a button's link (the preview links only URLs that pass)."""
    if not url:
        return "Add the link this button opens."
    try:
        parts = urlsplit(url)
    except ValueError:  # e.g. "https://[x": a bracketed host that is no IPv6 address
        return "Use a full https:// link, like https://example.com/guide."
    if parts.scheme != "https" or not parts.netloc or " " in url:
        return "Use a full https:// link, like https://example.com/guide."
    if len(url) > MAX_URL:
        return f"Links are at most {MAX_URL} characters."
    return None


def check_campaign(input_: CampaignInput, *, require_complete: bool) -> dict[str, str]:
    """Errors by form field; empty when the campaign may be saved (and activated)."""
    errors: dict[str, str] = {}
    if not input_.name:
        errors["name"] = "Give the campaign a name (only you see it)."
    elif len(input_.name) > MAX_NAME:
        errors["name"] = f"Names are at most {MAX_NAME} characters."
    if parse_id(input_.account_id) is None:
        errors["account_id"] = "Choose the Instagram account."
    if input_.trigger not in {t.value for t in CampaignTrigger}:
        errors["trigger"] = "Choose what this campaign answers."
    elif input_.trigger == CampaignTrigger.STORY_REPLIES:
        if input_.story_scope not in {ANY_STORY, ONE_STORY}:
            errors["story_id"] = "Choose which stories this campaign answers."
        elif input_.one_story and input_.story_id and not _MEDIA_ID.match(input_.story_id):
            errors["story_id"] = "That story id does not look right; pick the story again."
    if input_.on_comments and input_.scope not in {s.value for s in CampaignScope}:
        errors["scope"] = "Choose which posts this campaign watches."
    elif input_.on_comments and input_.scope == CampaignScope.POST and input_.media_id:
        if not _MEDIA_ID.match(input_.media_id):
            errors["media_id"] = "That post id does not look right; pick the post again."
        elif len(input_.media_caption) > MAX_CAPTION:
            errors["media_id"] = "That post's caption is too long to keep; pick the post again."
    if input_.match_mode not in {m.value for m in MatchMode}:
        errors["match_mode"] = "Choose how comments are matched."

    for name, keywords, label in (
        ("keywords", input_.keywords, "keywords"),
        ("excluded_keywords", input_.excluded_keywords, "excluded keywords"),
    ):
        problem = check_keywords(keywords, label)
        if problem:
            errors[name] = problem
    dm_problem = check_dm_text(input_)
    if dm_problem:
        errors["dm_text"] = dm_problem
    if len(input_.filled_buttons) + input_.extra_buttons > MAX_BUTTONS:
        errors["buttons"] = (
            f"At most {MAX_BUTTONS} buttons: Instagram shows no more. "
            f"This request had {len(input_.filled_buttons) + input_.extra_buttons}."
        )
    for index, button in enumerate(input_.buttons, start=1):
        if button.title or button.url:
            problem = _check_button(button)
            if problem:
                errors[f"button_{index}"] = problem
    replies = input_.public_replies
    if len(replies) > MAX_REPLIES:
        errors["public_replies"] = (
            f"At most {MAX_REPLIES} reply variants, one per line; this has {len(replies)}."
        )
    elif any(len(reply) > MAX_REPLY for reply in replies):
        errors["public_replies"] = f"Each reply is at most {MAX_REPLY} characters."
    low, high = PRIORITY_RANGE
    if parse_int(input_.priority, low=low, high=high) is None:
        errors["priority"] = "Priority is a whole number between −1000 and 1000."
    errors |= check_two_step(input_)
    errors |= check_media(input_)
    if require_complete:
        for name, problem in activation_problems(input_).items():
            errors.setdefault(name, problem)
    return errors


def activation_problems(input_: CampaignInput) -> dict[str, str]:
    """What a campaign still lacks before it may go live."""
    problems: dict[str, str] = {}
    if input_.on_comments and input_.scope == CampaignScope.POST and not input_.media_id:
        problems["media_id"] = "Pick the post to watch (or choose any post / next post)."
    if input_.one_story and not input_.story_id:
        problems["story_id"] = "Pick the story (or answer replies to any story)."
    if (
        not input_.on_mentions
        and input_.match_mode != MatchMode.ANY_COMMENT
        and not input_.keywords
    ):
        problems["keywords"] = "Add at least one keyword, or match any comment."
    if not input_.dm_text.strip():
        problems["dm_text"] = "Write the DM people receive."
    if input_.on_comments and input_.opening_dm_enabled:
        if not input_.opening_dm_text.strip():
            problems["opening_dm_text"] = "Write the opening DM (the message with the button)."
        if not input_.opening_dm_button_title:
            problems["opening_dm_button_title"] = "Give the opening DM's button a title."
    if input_.follow_gate_enabled:
        if not input_.follow_prompt_text.strip():
            problems["follow_prompt_text"] = "Write the message that asks people to follow you."
        if not input_.follow_prompt_button_title:
            problems["follow_prompt_button_title"] = "Give the follow prompt's button a title."
    if input_.follow_up_enabled:
        if not input_.follow_up_text.strip():
            problems["follow_up_text"] = "Write the follow-up, or turn it off."
        elif not (
            (input_.on_comments and input_.opening_dm_enabled)
            or input_.follow_gate_enabled
            or input_.dm_trigger_enabled
            or not input_.on_comments
        ):
            problems["follow_up_enabled"] = (
                "A follow-up can only go out after a button tap or a DM (Instagram allows no "
                "second message after a comment's private reply): turn on the opening DM, the "
                "follow gate or the DM keyword trigger."
            )
    if input_.on_comments and input_.dm_trigger_enabled and not input_.keywords:
        problems.setdefault("dm_trigger_enabled", "The DM keyword trigger needs keywords.")
    for name, problem in media_activation_problems(input_).items():
        problems.setdefault(name, problem)
    return problems


def input_from_values(values: Mapping[str, Any]) -> CampaignInput:
    """An editor form filled from a stored campaign's columns."""
    buttons = [
        LinkButton(str(b.get("title", "")), str(b.get("url", "")))
        for b in (values.get("buttons") or [])
        if isinstance(b, dict)
    ][:MAX_BUTTONS]
    buttons += [LinkButton("", "") for _ in range(MAX_BUTTONS - len(buttons))]
    story_id = str(values.get("story_id") or "")
    expires = values.get("story_expires_at")
    return CampaignInput(
        name=str(values.get("name") or ""),
        account_id=str(values.get("account_id") or ""),
        trigger=str(values.get("trigger") or CampaignTrigger.COMMENTS.value),
        story_scope=ONE_STORY if story_id else ANY_STORY,
        story_id=story_id,
        story_time=(expires - STORY_LIFETIME).isoformat() if isinstance(expires, datetime) else "",
        scope=str(values.get("scope") or CampaignScope.POST.value),
        media_id=str(values.get("media_id") or ""),
        media_caption=str(values.get("media_caption") or ""),
        match_mode=str(values.get("match_mode") or MatchMode.WHOLE_WORD.value),
        keywords=list(values.get("keywords") or []),
        excluded_keywords=list(values.get("excluded_keywords") or []),
        dm_text=str(values.get("dm_text") or ""),
        buttons=buttons,
        public_replies_text="\n".join(values.get("public_replies") or []),
        public_reply_always=not values.get("public_reply_after_dm", True),
        public_reply_skip_in_backlog=bool(values.get("public_reply_skip_in_backlog")),
        priority=str(values.get("priority") or 0),
        once_per_person=bool(values.get("once_per_person", True)),
        utm_enabled=bool(values.get("utm_enabled")),
        opening_dm_enabled=bool(values.get("opening_dm_enabled")),
        opening_dm_text=str(values.get("opening_dm_text") or ""),
        opening_dm_button_title=str(values.get("opening_dm_button_title") or ""),
        follow_gate_enabled=bool(values.get("follow_gate_enabled")),
        follow_prompt_text=str(values.get("follow_prompt_text") or ""),
        follow_prompt_button_title=str(values.get("follow_prompt_button_title") or ""),
        dm_trigger_enabled=bool(values.get("dm_trigger_enabled")),
        follow_up_enabled=bool(values.get("follow_up_enabled")),
        follow_up_text=str(values.get("follow_up_text") or ""),
        follow_up_delay_minutes=str(values.get("follow_up_delay_minutes") or 0),
        dm_image_url=str(values.get("dm_image_url") or ""),
        card_enabled=bool(values.get("card_enabled")),
        card_title=str(values.get("card_title") or ""),
        card_subtitle=str(values.get("card_subtitle") or ""),
    )
