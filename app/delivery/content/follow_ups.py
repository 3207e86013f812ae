"""Follow-ups: a durable `dm_logs` row scheduled when a reveal is recorded SENT.

Only after a reveal that answered a tap or a DM (`postback` and `message` rows): the person's
own action opened the 24-hour messaging window. Never after a link sent as the private reply
to a comment — Meta allows nothing more until the person writes or taps.

The row (trigger `followup:<reveal row id>`, `source_log_id` = the reveal) holds the text
rendered now, so a later edit of the campaign does not change a scheduled message, and is due
at interaction + delay; its deadline is interaction + 24 h, where the interaction is the tap
or DM the reveal answered (the reveal row's own deadline minus 24 h). It is inserted by the
same statement that records the reveal as SENT (`follow_up_cte`, used by `recording.record` and
by the inbox check that confirms an UNCONFIRMED reveal), so a SENT reveal never lacks its
follow-up, and `ON CONFLICT DO NOTHING` on the trigger makes a second insert a no-op. The
row is then sent by `send_follow_up` like any DM: claimed once, skipped as
SKIPPED_WINDOW_EXPIRED when the window has closed, never resent when UNCONFIRMED.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from app.campaigns.message_format import TEXT_MAX_BYTES, buttons_of, cut_bytes, render
from app.campaigns.validation import MAX_DELAY_MINUTES
from app.db.models import MessageKind, TriggerKind

MESSAGING_WINDOW = timedelta(hours=24)
# The triggers whose interaction opened the window a follow-up needs.
WINDOW_OPENING_TRIGGERS = frozenset(
    {TriggerKind.POSTBACK, TriggerKind.MESSAGE, TriggerKind.STORY_REPLY, TriggerKind.STORY_MENTION}
)


@dataclass(frozen=True, slots=True)
class FollowUpPlan:
    text: str
    due_at: datetime
    deadline_at: datetime


def plan_follow_up(
    *,
    trigger_kind: TriggerKind | str,
    message_kind: MessageKind | None,
    enabled: bool,
    text: str | None,
    delay_minutes: int,
    deadline_at: datetime | None,
    username: str | None,
    buttons: Sequence[Mapping[str, Any]],
) -> FollowUpPlan | None:
    """The follow-up a just-SENT message calls for, or None."""
    if (
        message_kind is not MessageKind.REVEAL
        or TriggerKind(trigger_kind) not in WINDOW_OPENING_TRIGGERS
        or not enabled
        or not (text or "").strip()
        or deadline_at is None
    ):
        return None
    interaction = deadline_at - MESSAGING_WINDOW
    delay = timedelta(minutes=min(max(delay_minutes, 0), MAX_DELAY_MINUTES))
    return FollowUpPlan(
        text=render_follow_up(text or "", username=username, buttons=buttons),
        due_at=interaction + delay,
        deadline_at=deadline_at,
    )


def render_follow_up(
    text: str, *, username: str | None, buttons: Sequence[Mapping[str, Any]]
) -> str:
    """The follow-up as the person reads it: `{link}` is the first button's URL."""
    links = buttons_of(buttons)
    rendered = render(text, username=username, link=links[0].url if links else None)
    return cut_bytes(rendered.strip(), TEXT_MAX_BYTES)


class _Row(Protocol):
    """The fields of a loaded delivery (`legs.Delivery`) a follow-up is planned from."""

    @property
    def trigger_kind(self) -> str: ...
    @property
    def follow_up_enabled(self) -> bool: ...
    @property
    def follow_up_text(self) -> str | None: ...
    @property
    def follow_up_delay_minutes(self) -> int: ...
    @property
    def deadline_at(self) -> datetime | None: ...
    @property
    def recipient_username(self) -> str | None: ...
    @property
    def buttons(self) -> list[dict[str, Any]]: ...


def follow_up_for(row: _Row, message_kind: MessageKind | None) -> FollowUpPlan | None:
    """`plan_follow_up` for a loaded delivery that sent (or is sending) `message_kind`."""
    return plan_follow_up(
        trigger_kind=row.trigger_kind,
        message_kind=message_kind,
        enabled=row.follow_up_enabled,
        text=row.follow_up_text,
        delay_minutes=row.follow_up_delay_minutes,
        deadline_at=row.deadline_at,
        username=row.recipient_username,
        buttons=row.buttons,
    )


def follow_up_params(plan: FollowUpPlan | None) -> dict[str, Any]:
    """The bound values `follow_up_cte` reads (all None: no follow-up)."""
    if plan is None:
        return {"fu_text": None, "fu_at": None, "fu_deadline": None}
    return {"fu_text": plan.text, "fu_at": plan.due_at, "fu_deadline": plan.deadline_at}


def follow_up_cte(source: str) -> str:
    """A `follow_up` CTE inserting the follow-up of the row(s) in CTE `source`, which must
    return the log row's id, workspace_id, account_id, campaign_id, campaign_version,
    recipient_id and recipient_username. Inserts nothing when `:fu_text` is NULL; returns the
    new row's id and due time. The follow-up's text is also its `trigger_text`, what the
    delivery log shows and searches for a row."""
    return f"""follow_up AS (
    INSERT INTO dm_logs (workspace_id, account_id, campaign_id, campaign_version, trigger_kind,
        trigger_id, source_log_id, recipient_id, recipient_username, trigger_text, deadline_at,
        message_text, message_kind, pr_next_attempt_at)
    SELECT s.workspace_id, s.account_id, s.campaign_id, s.campaign_version, 'follow_up',
        'followup:' || s.id, s.id, s.recipient_id, s.recipient_username, CAST(:fu_text AS text),
        CAST(:fu_deadline AS timestamptz), CAST(:fu_text AS text), 'follow_up',
        CAST(:fu_at AS timestamptz)
    FROM {source} s WHERE CAST(:fu_text AS text) IS NOT NULL
    ON CONFLICT (account_id, trigger_id) DO NOTHING
    RETURNING id, pr_next_attempt_at
)"""  # noqa: S608 - `source` is a CTE name from code; every value is a bound parameter
