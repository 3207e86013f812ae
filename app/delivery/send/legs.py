"""What the flows hold while a row's legs go through the delivery statements.

A `dm_logs` row has a private-reply leg (the DM: a comment's private reply, or a DM to the
person after a tap or a DM trigger) and, for a comment whose campaign has one, a public-reply
leg. The row is loaded once (`Delivery`); each leg is then claimed (`Claim`, or
`AccountUnable` when the account cannot send), called (`CallReport`: what Meta answered),
moved on (`LegUpdate`: its next state) and recorded (`Recorded`). The statements that take
and give these values are in `claims` (load, claim) and `recording` (record, settle,
postpone); `outcomes` turns an answer into a `LegUpdate`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from app.campaigns.media_message import Card
from app.db.models import AttemptClass, Leg, LegState, MessageKind
from app.delivery.content.compose import CampaignTexts
from app.delivery.content.follow_ups import FollowUpPlan

MAX_PUBLIC_ATTEMPTS = 3


@dataclass(frozen=True, slots=True)
class Delivery:
    """A log row with what sending it needs from its campaign, account and workspace.

    `claims.load_delivery` selects one column per field, under the field's name.
    """

    id: int
    workspace_id: int
    account_id: int
    campaign_id: int | None
    trigger_kind: str
    trigger_id: str
    recipient_id: str | None
    recipient_username: str | None
    deadline_at: datetime | None
    pr_state: LegState
    pr_attempts: int
    pr_attempt_limit: int
    pr_next_attempt_at: datetime | None
    pr_evidence: dict[str, Any] | None
    pub_state: LegState | None
    pub_attempts: int
    pub_next_attempt_at: datetime | None
    ig_user_id: str
    account_status: str
    paused_until: datetime | None
    token_ciphertext: bytes | None
    token_key_id: str | None
    campaign_status: str | None
    dm_text: str
    buttons: list[dict[str, Any]]
    public_replies: list[str]
    once_per_person: bool
    # The DM flow's part: what the row is about and the campaign's two-step settings.
    trigger_payload: str | None = None
    source_log_id: int | None = None
    message_text: str | None = None
    message_kind: MessageKind | None = None
    opening_dm_enabled: bool = False
    opening_dm_text: str | None = None
    opening_dm_button_title: str | None = None
    follow_gate_enabled: bool = False
    follow_prompt_text: str | None = None
    follow_prompt_button_title: str | None = None
    follow_up_enabled: bool = False
    # The public reply waits for the DM to be SENT (see `comment_flow`).
    public_reply_after_dm: bool = True
    # The public reply is skipped while the account has a backlog (`account_backlog`).
    public_reply_skip_in_backlog: bool = False
    follow_up_text: str | None = None
    follow_up_delay_minutes: int = 0
    # A PENDING tap or DM whose person another row already gave (or is giving) the link, as
    # seen at load: `recording.settle_if_revealed` then settles it (and checks again as it
    # does).
    revealed_elsewhere: bool = False
    # The comment path's budget: when the account's pacer granted this row a slot, and whether
    # the account's private replies wait for its pacer (`app.delivery.send.pacer`).
    pr_granted_at: datetime | None = None
    account_backlog: bool = False
    # Likewise for the public reply and the public replies' own budget
    # (`app.delivery.send.public_pacer`).
    pub_granted_at: datetime | None = None
    public_backlog: bool = False
    # Tracked links: the campaign's name goes into utm_campaign when its UTM switch is on.
    campaign_name: str = ""
    utm_enabled: bool = False
    # The image and card of a DM after a tap or a DM (`app.campaigns.media_message`).
    dm_image_url: str | None = None
    card_enabled: bool = False
    card_title: str | None = None
    card_subtitle: str | None = None

    def texts(self) -> CampaignTexts:
        """The campaign settings its messages are made of (`app.delivery.content.compose`)."""
        return CampaignTexts(
            campaign_id=self.campaign_id or 0,
            dm_text=self.dm_text,
            buttons=self.buttons,
            opening_dm_text=self.opening_dm_text,
            opening_dm_button_title=self.opening_dm_button_title,
            follow_gate=self.follow_gate_enabled,
            follow_prompt_text=self.follow_prompt_text,
            follow_prompt_button_title=self.follow_prompt_button_title,
            image_url=self.dm_image_url or None,
            card=(
                Card(self.card_title or "", self.card_subtitle or "") if self.card_enabled else None
            ),
        )


@dataclass(frozen=True, slots=True)
class Claim:
    """The outcome of a claim statement for the worker that ran it."""

    leg: Leg
    state: LegState  # IN_FLIGHT: ours to send; SKIPPED_*: settled by the claim itself
    attempt_no: int
    attempt_id: int | None
    quota_month: date | None = None

    @property
    def won(self) -> bool:
        return self.state is LegState.IN_FLIGHT


@dataclass(frozen=True, slots=True)
class AccountUnable:
    """A claim refused because the account cannot send now; the row was left as it was."""

    status: str
    paused_until: datetime | None


@dataclass(frozen=True, slots=True)
class CallReport:
    """What one call to Meta returned, for its `delivery_attempts` row."""

    classification: AttemptClass
    latency_ms: int
    http_status: int | None = None
    code: int | None = None
    subcode: int | None = None
    fbtrace_id: str | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class LegUpdate:
    """Where a claimed leg goes after its call(s)."""

    state: LegState
    message_id: str | None = None  # Meta's message id, or the public reply's comment id
    next_attempt_at: datetime | None = None
    # Give the attempt back to the budget (account-level waits: 368, 190).
    refund_attempt: bool = False
    error_code: int | None = None
    error_subcode: int | None = None
    error_message: str | None = None
    evidence: dict[str, Any] | None = None
    # Private replies only: give the quota back (the month it was taken) / free the person.
    release_quota_month: date | None = None
    release_person: bool = False
    # DMs only: the follow-up a SENT reveal schedules (inserted by the same statement).
    follow_up: FollowUpPlan | None = None
    # A comment's private reply refused for the account's pace: back to waiting for the
    # account's pacer (its grant cleared, the account's backlog marked, by the same statement).
    to_pacer: bool = False


@dataclass(frozen=True, slots=True)
class Recorded:
    """What `recording.record` did; true when the outcome was written (the claim was still
    ours)."""

    written: bool
    follow_up_id: int | None = None
    follow_up_due: datetime | None = None

    def __bool__(self) -> bool:
        return self.written
