"""What a Graph answer to a send means for delivery: sent, rejected, retryable or ambiguous.

The table (docs/architecture.md#classification) has one rule above all:
when Meta may have delivered the message, the answer is AMBIGUOUS and the leg becomes
UNCONFIRMED, never sent again automatically. So an HTTP 5xx is ambiguous whatever error code
rides on it, codes 1 and 2 are ambiguous whatever their HTTP status, and a timeout or reset
after the request left this machine is ambiguous. Only a request that never left (a refused
connection) is a definite non-delivery.

The classification is pure: account-level consequences (pause on 368, token refresh on 190)
are flagged here and carried out by `app.delivery.send.account_state`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from app.db.models import AttemptClass, Leg, LegState
from app.instagram.graph import (
    GraphApiError,
    GraphBadResponseError,
    GraphError,
    GraphTransportError,
)

# Rate limits of every flavour: app (4), user (17), page (32), application (341), custom and
# messaging (613), business use case (80002 Instagram, 80006 Messenger).
RETRYABLE_CODES = frozenset({4, 17, 32, 341, 613, 80002, 80006})
# The ones that limit the Instagram account's own pace (app, user, page, custom or messaging,
# Instagram business use case): the account slows or pauses, not just this message.
PACE_LIMIT_CODES = frozenset({4, 17, 32, 613, 80002})
# 613 with this subcode is "tag use is bothersome": a misuse, not a passing limit.
_FINAL_613_SUBCODES = frozenset({2018338})
WINDOW_SUBCODES = frozenset({2534022, 2018278, 2018065})
ALREADY_USED_SUBCODE = 2534025
DELETED_SUBCODE = 33
AMBIGUOUS_CODES = frozenset({1, 2})

# A code-100 answer that names the template, its buttons, elements or attachment, or an image
# Meta could not fetch, may fall back to a plainer message (a card to the button template, a
# template to plain text); but
# never one that says the window is closed, the comment cannot take a private reply or the
# user is gone: the first call may already have used the comment's only private reply. Both
# the subcode and Meta's wording are checked, since either may be missing or reworded.
_NOT_A_TEMPLATE_SUBCODES = WINDOW_SUBCODES | {
    ALREADY_USED_SUBCODE,
    DELETED_SUBCODE,
    2018001,  # no matching user found
    2534014,  # no matching Instagram user
    2534013,  # the page is not linked to an Instagram account
    2534029,  # the business is blocked from Instagram messaging
    2534037,  # the app does not own the thread
}
_TEMPLATE_WORDS = re.compile(
    r"template|button|attachment|element|image|fetch the file", re.IGNORECASE
)
_NOT_A_TEMPLATE_PROBLEM = re.compile(
    r"outside of allowed window|invalid for a private reply|user cannot be found"
    r"|no matching (instagram )?user",
    re.IGNORECASE,
)


class AccountAction(StrEnum):
    """Something the answer says about the whole account, not just this message."""

    PAUSE = "pause"  # 368: policy block, stop sending from this account for hours
    REFRESH_TOKEN = "refresh_token"  # noqa: S105 - 190: the token is invalid or expired


@dataclass(frozen=True, slots=True)
class Verdict:
    """The meaning of one call's answer for its leg."""

    outcome: AttemptClass
    reason: str
    # For REJECTED: the leg's final state (FAILED or SKIPPED_WINDOW_EXPIRED).
    final_state: LegState | None = None
    account_action: AccountAction | None = None
    # Meta asked us to wait this long before trying again (BUC estimated_time_to_regain_access).
    retry_after_s: float | None = None
    # Code 100 about the template, its buttons or its image: a plainer form may be tried.
    template_rejected: bool = False
    # 100/2534025: the comment's private reply is already used (or it is ineligible).
    comment_already_used: bool = False
    http_status: int | None = None
    code: int | None = None
    subcode: int | None = None
    fbtrace_id: str | None = None
    message: str | None = None

    @property
    def pace_limited(self) -> bool:
        """A rate limit of the account's pace (`PACE_LIMIT_CODES`): nothing was delivered, and
        the message can go once the account's pace allows."""
        return self.outcome is AttemptClass.RETRYABLE and self.code in PACE_LIMIT_CODES

    @property
    def definite(self) -> bool:
        """Nothing was delivered: slots, quota and person claims can be given back."""
        return self.outcome in (AttemptClass.REJECTED, AttemptClass.RETRYABLE)


def classify_error(error: GraphError, leg: Leg = Leg.PRIVATE_REPLY) -> Verdict:
    """Classify a failed send (`POST /messages` or `POST /{comment}/replies`)."""
    if isinstance(error, GraphTransportError):
        if error.request_sent:
            ended = "timed out" if "Timeout" in error.kind else "was cut"
            return Verdict(
                AttemptClass.AMBIGUOUS,
                f"the request left for Instagram but the connection {ended} before an answer "
                "came back, so the message may have been delivered",
                message=f"{error.kind}: {error.detail}"[:500],
            )
        return Verdict(
            AttemptClass.RETRYABLE,
            f"the request never reached Meta ({error.kind})",
            message=error.detail[:500],
        )
    if isinstance(error, GraphBadResponseError):
        return Verdict(
            AttemptClass.AMBIGUOUS,
            "Instagram's answer could not be read, so the message may have been delivered",
            http_status=error.http_status,
            message=error.preview[:500],
        )
    if isinstance(error, GraphApiError):
        return _classify_api_error(error, leg)
    return Verdict(
        AttemptClass.AMBIGUOUS,
        "the send failed in an unexpected way, so the message may have been delivered",
        message=str(error)[:500],
    )


def _classify_api_error(error: GraphApiError, leg: Leg) -> Verdict:
    code, subcode = error.code, error.subcode
    label = f"{code}/{subcode}" if subcode is not None else f"{code}"
    if code in AMBIGUOUS_CODES or error.http_status >= 500 or code is None:
        return _from_api(
            error,
            AttemptClass.AMBIGUOUS,
            "Instagram answered with an error that does not say whether the message went out "
            "(a fault on its side), so it may have been delivered",
        )
    if code == 368:
        return _from_api(
            error,
            AttemptClass.RETRYABLE,
            "Meta blocked the account for policy reasons (368); sending is paused",
            account_action=AccountAction.PAUSE,
        )
    if code == 190:
        return _from_api(
            error,
            AttemptClass.RETRYABLE,
            f"the access token was refused ({label})",
            account_action=AccountAction.REFRESH_TOKEN,
        )
    if code in RETRYABLE_CODES and subcode not in _FINAL_613_SUBCODES:
        minutes = error.usage.regain_access_minutes
        return _from_api(
            error,
            AttemptClass.RETRYABLE,
            f"rate limited by Meta ({label})",
            retry_after_s=minutes * 60.0 if minutes else None,
        )
    if code == 10 and subcode in WINDOW_SUBCODES:
        return _from_api(
            error,
            AttemptClass.REJECTED,
            "outside the allowed messaging window",
            final_state=LegState.SKIPPED_WINDOW_EXPIRED,
        )
    if code == 100 and subcode == ALREADY_USED_SUBCODE:
        return _from_api(
            error,
            AttemptClass.REJECTED,
            "the comment is invalid for a private reply (already used, too old or ineligible)",
            final_state=LegState.FAILED,
            comment_already_used=leg is Leg.PRIVATE_REPLY,
        )
    if code == 100 and subcode == DELETED_SUBCODE:
        reason = "the comment was deleted or cannot be reached"
    elif code == 551:
        reason = "the person is unavailable or cannot receive messages"
    elif code == 200:
        reason = "missing permission (the account must allow access to messages)"
    else:
        reason = f"Meta refused the request ({label}): {error.message[:200]}"
    template_rejected = (
        leg is Leg.PRIVATE_REPLY
        and code == 100
        and subcode not in _NOT_A_TEMPLATE_SUBCODES
        and bool(_TEMPLATE_WORDS.search(error.message))
        and not _NOT_A_TEMPLATE_PROBLEM.search(error.message)
    )
    return _from_api(
        error,
        AttemptClass.REJECTED,
        reason,
        final_state=LegState.FAILED,
        template_rejected=template_rejected,
    )


def _from_api(
    error: GraphApiError,
    outcome: AttemptClass,
    reason: str,
    *,
    final_state: LegState | None = None,
    account_action: AccountAction | None = None,
    retry_after_s: float | None = None,
    template_rejected: bool = False,
    comment_already_used: bool = False,
) -> Verdict:
    return Verdict(
        outcome,
        reason,
        final_state=final_state,
        account_action=account_action,
        retry_after_s=retry_after_s,
        template_rejected=template_rejected,
        comment_already_used=comment_already_used,
        http_status=error.http_status,
        code=error.code,
        subcode=error.subcode,
        fbtrace_id=error.fbtrace_id,
        message=error.message[:1000],
    )
