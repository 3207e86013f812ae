"""The dashboard's words for delivery states, Meta's refusals and calls to Instagram: one
mapping, so every screen says the same thing in words a creator uses. The codes themselves
(a state's name, Meta's error code) stay in the page as data attributes and in the
timeline's details, for support and for the operator.
"""

from __future__ import annotations

from app.db.models import AttemptClass, LegState, MessageKind, TriggerKind

# A leg's state as the badge shows it.
STATE_WORDS: dict[LegState, str] = {
    LegState.PENDING: "Waiting to send",
    LegState.IN_FLIGHT: "Sending",
    LegState.SENT: "Sent",
    LegState.FAILED: "Not sent",
    LegState.UNCONFIRMED: "Maybe sent",
    LegState.SKIPPED_DEDUP: "Already sent to this person",
    LegState.SKIPPED_RATE_LIMIT: "Skipped: DMs were waiting",
    LegState.SKIPPED_QUOTA: "Skipped: monthly quota used",
    LegState.SKIPPED_WINDOW_EXPIRED: "Too late to reply",
    LegState.SKIPPED_ACCOUNT_PAUSED: "Skipped: account paused",
    LegState.SKIPPED_CAMPAIGN_INACTIVE: "Skipped: campaign not active",
}
# PENDING and IN_FLIGHT as one number, as the kept counts hold them (a campaign's misses).
UNSETTLED_WORDS = "Waiting or being sent"
# What a skipped state means, as the rest of a sentence ("Not sent: …").
SKIP_REASONS: dict[LegState, str] = {
    LegState.SKIPPED_DEDUP: "this person already got this campaign's message",
    LegState.SKIPPED_RATE_LIMIT: (
        "DMs were waiting for Instagram's hourly limit, and the campaign skips its public "
        "reply then"
    ),
    LegState.SKIPPED_QUOTA: "the workspace's monthly DM quota is used up",
    LegState.SKIPPED_WINDOW_EXPIRED: "Instagram's reply window had closed",
    LegState.SKIPPED_ACCOUNT_PAUSED: "the Instagram account was paused",
    LegState.SKIPPED_CAMPAIGN_INACTIVE: "the campaign was no longer active",
}
# Meta's refusals by error code (and subcode), as the log row says them.
_META_REFUSALS: dict[tuple[int, int | None], str] = {
    (551, None): "Instagram refused: this person can't receive messages",
    (10, None): "Instagram refused: outside the time Instagram allows a reply",
    (100, 2534022): "Instagram refused: outside the time Instagram allows a reply",
    (100, None): "Instagram refused: the comment can't get a private reply",
    (200, None): "Instagram refused: the account doesn't allow access to messages",
    (190, None): "Instagram refused the account's access: reconnect it",
    (368, None): "Instagram paused the account for a policy reason",
    (4, None): "Instagram asked to slow down",
    (17, None): "Instagram asked to slow down",
    (32, None): "Instagram asked to slow down",
    (613, None): "Instagram asked to slow down",
}
# What one call to Instagram came to (the timeline's calls table).
CALL_RESULTS: dict[str, str] = {
    AttemptClass.SENT.value: "delivered",
    AttemptClass.REJECTED.value: "refused",
    AttemptClass.AMBIGUOUS.value: "answer unclear",
    AttemptClass.RETRYABLE.value: "to try again",
    "open": "no answer yet",
}
# What a row's DM said, under its state in the log ("Sent · the request to follow").
MESSAGE_WORDS: dict[str, str] = {
    MessageKind.REVEAL.value: "the link",
    MessageKind.OPENING_DM.value: "the tap-for-the-link DM",
    MessageKind.FOLLOW_PROMPT.value: "the request to follow",
    MessageKind.FOLLOW_UP.value: "the follow-up",
}
# What started a delivery, as the log's trigger filter names it.
TRIGGER_WORDS: dict[TriggerKind, str] = {
    TriggerKind.COMMENT: "Comment",
    TriggerKind.MESSAGE: "DM keyword",
    TriggerKind.POSTBACK: "Button tap",
    TriggerKind.FOLLOW_UP: "Follow-up",
    TriggerKind.STORY_REPLY: "Story reply",
    TriggerKind.STORY_MENTION: "Story mention",
}
# The "checking…" note the follow gate sends after a "not yet" tap.
CHECKING_NOTE_WORDS = "the “checking…” note"

# What was asked of Instagram, by the attempt's request kind.
REQUEST_KINDS: dict[str, str] = {
    "template": "message with buttons",
    "text": "text message",
    "image": "image",
    "card": "card",
    "reply": "",
    "dm": "message",
}


def state_words(state: LegState | None) -> str:
    if state is None:
        return "—"
    return STATE_WORDS.get(state, state.value.replace("_", " ").capitalize())


def meta_refusal(code: int | None, subcode: int | None = None) -> str | None:
    """Meta's error code in words, or None when there is no code."""
    if code is None:
        return None
    found = _META_REFUSALS.get((code, subcode)) or _META_REFUSALS.get((code, None))
    return found or "Instagram refused the message"
