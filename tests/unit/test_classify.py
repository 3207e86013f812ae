"""How every kind of answer to a send is classified (docs/architecture.md#classification),
row by row: Meta's error codes and subcodes, HTTP statuses and transport failures."""

from __future__ import annotations

import pytest

from app.db.models import AttemptClass, Leg, LegState
from app.instagram.classify import AccountAction, classify_error
from app.instagram.graph import (
    GraphApiError,
    GraphBadResponseError,
    GraphTransportError,
    Usage,
)


def api(
    code: int | None,
    subcode: int | None = None,
    *,
    status: int = 400,
    message: str = "error",
    usage: Usage | None = None,
) -> GraphApiError:
    return GraphApiError(
        http_status=status,
        code=code,
        subcode=subcode,
        message=message,
        error_type="IGApiException",
        fbtrace_id="trace",
        is_transient=None,
        usage=usage or Usage(),
    )


TABLE = [
    # code, subcode, http status, outcome, final state
    (1, None, 500, AttemptClass.AMBIGUOUS, None),
    (1, 1357046, 500, AttemptClass.AMBIGUOUS, None),
    (1, None, 400, AttemptClass.AMBIGUOUS, None),
    (2, None, 503, AttemptClass.AMBIGUOUS, None),
    (4, None, 400, AttemptClass.RETRYABLE, None),
    (4, None, 500, AttemptClass.AMBIGUOUS, None),  # any 5xx on a send may have delivered
    (17, None, 400, AttemptClass.RETRYABLE, None),
    (32, None, 400, AttemptClass.RETRYABLE, None),
    (341, None, 400, AttemptClass.RETRYABLE, None),
    (613, None, 400, AttemptClass.RETRYABLE, None),
    (613, 2534040, 429, AttemptClass.RETRYABLE, None),
    (613, 2018338, 400, AttemptClass.REJECTED, LegState.FAILED),
    (80002, None, 400, AttemptClass.RETRYABLE, None),
    (80006, None, 400, AttemptClass.RETRYABLE, None),
    (3, None, 400, AttemptClass.REJECTED, LegState.FAILED),
    (10, None, 403, AttemptClass.REJECTED, LegState.FAILED),
    (10, 2534022, 403, AttemptClass.REJECTED, LegState.SKIPPED_WINDOW_EXPIRED),
    (10, 2018278, 403, AttemptClass.REJECTED, LegState.SKIPPED_WINDOW_EXPIRED),
    (10, 2018065, 403, AttemptClass.REJECTED, LegState.SKIPPED_WINDOW_EXPIRED),
    (10, 2018108, 403, AttemptClass.REJECTED, LegState.FAILED),
    (10, 1893063, 403, AttemptClass.REJECTED, LegState.FAILED),
    (100, None, 400, AttemptClass.REJECTED, LegState.FAILED),
    (100, 33, 400, AttemptClass.REJECTED, LegState.FAILED),
    (100, 2534025, 400, AttemptClass.REJECTED, LegState.FAILED),
    (100, 2534014, 400, AttemptClass.REJECTED, LegState.FAILED),
    (200, None, 403, AttemptClass.REJECTED, LegState.FAILED),
    (200, 2534041, 403, AttemptClass.REJECTED, LegState.FAILED),
    (230, None, 400, AttemptClass.REJECTED, LegState.FAILED),
    (551, None, 400, AttemptClass.REJECTED, LegState.FAILED),
    (551, 1545041, 400, AttemptClass.REJECTED, LegState.FAILED),
    (2500, None, 400, AttemptClass.REJECTED, LegState.FAILED),
    (None, None, 400, AttemptClass.AMBIGUOUS, None),  # an error object without a code
]


@pytest.mark.parametrize(("code", "subcode", "status", "outcome", "state"), TABLE)
def test_reference_table(
    code: int | None,
    subcode: int | None,
    status: int,
    outcome: AttemptClass,
    state: LegState | None,
) -> None:
    verdict = classify_error(api(code, subcode, status=status))
    assert verdict.outcome is outcome
    assert verdict.final_state is state
    assert verdict.code == code
    assert verdict.definite is (outcome in (AttemptClass.REJECTED, AttemptClass.RETRYABLE))
    assert verdict.reason


def test_account_level_answers() -> None:
    assert classify_error(api(368)).account_action is AccountAction.PAUSE
    refused = classify_error(api(190, 463))
    assert refused.account_action is AccountAction.REFRESH_TOKEN
    assert refused.outcome is AttemptClass.RETRYABLE


def test_only_a_request_that_never_left_is_a_definite_transport_failure() -> None:
    refused = classify_error(GraphTransportError("ConnectError", request_sent=False, detail="x"))
    assert refused.outcome is AttemptClass.RETRYABLE
    for kind in ("ReadTimeout", "RemoteProtocolError", "ReadError"):
        lost = classify_error(GraphTransportError(kind, request_sent=True, detail="x"))
        assert lost.outcome is AttemptClass.AMBIGUOUS
    unreadable = classify_error(GraphBadResponseError(500, "<html>"))
    assert unreadable.outcome is AttemptClass.AMBIGUOUS
    assert classify_error(GraphBadResponseError(200, "{}")).outcome is AttemptClass.AMBIGUOUS


@pytest.mark.parametrize(
    ("code", "subcode", "message", "fallback"),
    [
        (100, None, "(#100) Invalid button template", True),
        (100, 2534015, "Param message[attachment][payload][buttons][0][title] too long", True),
        (100, 2534015, "Template text must be at most 640 characters", True),
        (100, 2534025, "The comment is invalid for a private reply (template)", False),
        (10, 2534022, "This message is sent outside of allowed window (template)", False),
        (100, 2534014, "The requested user cannot be found (buttons)", False),
        (100, 33, "Object with ID 'x' does not exist (template)", False),
        (100, None, "(#100) Invalid parameter", False),
        (100, 2534015, "Param message[attachment][payload][elements][0][title] too long", True),
        (100, 2018008, "(#100) Failed to fetch the file from the url: https://e.x/a", True),
        (100, 2534025, "The comment is invalid for a private reply (image)", False),
        (551, None, "button", False),
    ],
)
def test_text_fallback_only_for_a_rejected_template(
    code: int, subcode: int | None, message: str, fallback: bool
) -> None:
    assert classify_error(api(code, subcode, message=message)).template_rejected is fallback


@pytest.mark.parametrize("subcode", [2534025, 33, 2534014, 2018001, 2534022, 2018278, 2018065])
def test_no_text_fallback_for_a_subcode_that_is_not_about_the_template(subcode: int) -> None:
    # Worded so that only the subcode tells: Meta's messages change, its codes are documented.
    verdict = classify_error(api(100, subcode, message="(#100) Invalid button template"))
    assert not verdict.template_rejected
    # The same words without such a subcode are a template problem.
    assert classify_error(
        api(100, None, message="(#100) Invalid button template")
    ).template_rejected


def test_public_replies_never_fall_back_and_never_claim_the_comment_was_used() -> None:
    verdict = classify_error(api(100, 2534025, message="template"), Leg.PUBLIC_REPLY)
    assert not verdict.template_rejected
    assert not verdict.comment_already_used
    assert classify_error(api(100, 2534025)).comment_already_used


def test_meta_asks_to_wait_longer() -> None:
    usage = Usage(business={"1": [{"estimated_time_to_regain_access": 12}]})
    verdict = classify_error(api(80002, usage=usage))
    assert verdict.retry_after_s == 720
