"""`dm_logs.pr_evidence` in sentences: what we know about a send whose answer was lost.

The engine writes the evidence (see `app.delivery.recovery.inbox_check`,
`app.delivery.send.outcomes`, `app.delivery.recovery.manual_retry`); the creator reads it on a
row's timeline before deciding to send again.
Keys this understands: `inbox_check` (the last look in the conversation), `check_requested`
(a creator asked to look again), `confirmed_by`/`confirmed_at`/`message_id`/`detail` and
`matched_on`/`matched_why` (how a send was proven delivered, and why that message is this
one's), `manual_retry` (the last retry and the state it came from), and
for taps and DM triggers the follow gate's `follow_checks` (each "not following yet") and
`follow_gate` (the check that decided what was sent, see `app.delivery.content.follow_gate`).
Anything else is shown as it is, so nothing the engine records is hidden.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.db.models import LegState
from app.delivery_log.words import STATE_WORDS

_KNOWN = {
    "inbox_check",
    "check_requested",
    "confirmed_by",
    "confirmed_at",
    "message_id",
    "created_time",
    "matched_on",
    "matched_why",
    "detail",
    "manual_retry",
    "follow_checks",
    "follow_gate",
}
_SENT = {
    "reveal": "the link",
    "follow_prompt": "the request to follow",
    "opening_dm": "the opening DM",
}
_CONFIRMED_BY = {
    "conversations_api": "found in the conversation with the person (Conversations API)",
    "meta_already_used": (
        "a retry was answered “this comment already has its private reply” (100/2534025) "
        "inside the 7-day window after an earlier send whose answer was lost: that send had "
        "arrived"
    ),
}


@dataclass(frozen=True, slots=True)
class EvidenceLine:
    label: str
    text: str
    at: datetime | None = None
    kind: str = "info"  # info, found, not_found, failed, waiting


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def _check_line(check: dict[str, Any]) -> EvidenceLine:
    result = str(check.get("result") or "")
    at = _time(check.get("checked_at")) or _time(check.get("confirmed_at"))
    detail = str(check.get("detail") or "")
    if result == "found":
        return EvidenceLine("Conversation checked", "the message was found there", at, "found")
    if result == "not_found":
        return EvidenceLine("Conversation checked", detail or "not found", at, "not_found")
    if result == "check_failed":
        text = "the check itself failed" + (f": {detail}" if detail else "")
        return EvidenceLine("Conversation checked", text, at, "failed")
    throttled = check.get("throttled")
    if throttled:
        text = f"Instagram asked us to slow down ({throttled}×); the check will run again"
        return EvidenceLine("Conversation check", text, at, "waiting")
    return EvidenceLine("Conversation check", detail or result or "recorded", at)


def describe_evidence(evidence: dict[str, Any] | None) -> list[EvidenceLine]:
    """The evidence as lines for the timeline, oldest facts first."""
    if not evidence:
        return []
    lines: list[EvidenceLine] = []
    retry = evidence.get("manual_retry")
    if isinstance(retry, dict):
        was = (
            STATE_WORDS.get(LegState(retry["from_state"]))
            if retry.get("from_state") in {state.value for state in LegState}
            else None
        )
        text = f"sent again by a creator (it was “{was or '?'}”)"
        if retry.get("attempts_before") is not None:
            text += f" after {retry['attempts_before']} attempt(s)"
        lines.append(EvidenceLine("Retry", text, _time(retry.get("at"))))
    check = evidence.get("inbox_check")
    checked_at = None
    if isinstance(check, dict):
        line = _check_line(check)
        checked_at = line.at
        lines.append(line)
    requested = evidence.get("check_requested")
    if isinstance(requested, dict):
        at = _time(requested.get("at"))
        if at is not None and (checked_at is None or at > checked_at):
            who = requested.get("by")
            text = "waiting for the result" + (f" (asked by {who})" if who else "")
            lines.append(EvidenceLine("Check requested", text, at, "waiting"))
    lines.extend(_follow_gate_lines(evidence))
    confirmed = evidence.get("confirmed_by")
    if confirmed:
        text = _CONFIRMED_BY.get(str(confirmed), str(confirmed))
        if evidence.get("message_id"):
            text += f"; message id {evidence['message_id']}"
        if evidence.get("matched_why"):
            text += f" ({evidence['matched_why']})"
        lines.append(
            EvidenceLine("Confirmed delivered", text, _time(evidence.get("confirmed_at")), "found")
        )
    for key, value in evidence.items():
        if key not in _KNOWN:
            lines.append(EvidenceLine(key.replace("_", " "), str(value)))
    return lines


def _follow_gate_lines(evidence: dict[str, Any]) -> list[EvidenceLine]:
    lines: list[EvidenceLine] = []
    checks = evidence.get("follow_checks")
    if isinstance(checks, list) and checks:
        last = checks[-1] if isinstance(checks[-1], dict) else {}
        text = (
            f"not following yet at {len(checks)} check(s); checked again after a wait, "
            "since Instagram takes up to a minute to show a new follow"
        )
        lines.append(EvidenceLine("Follow checks", text, _time(last.get("checked_at")), "waiting"))
    gate = evidence.get("follow_gate")
    if isinstance(gate, dict):
        sent = _SENT.get(str(gate.get("sent")), str(gate.get("sent")))
        text = f"sent {sent}" + (f": {gate['why']}" if gate.get("why") else "")
        lines.append(EvidenceLine("Follow gate", text, _time(gate.get("checked_at"))))
    return lines
