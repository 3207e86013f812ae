"""Which message in a conversation is a row's own send (`inbox_check.pick_match`), and when
"already has its private reply" proves an earlier send (`outcomes.failure_update`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from app.db.models import AttemptClass, LegState
from app.delivery.recovery.inbox_check import Sought, pick_match
from app.delivery.send.outcomes import AttemptContext, failure_update
from app.instagram.classify import Verdict

ACCOUNT, FAN, OTHER = "17841458120395731", "6001", "6002"
CLAIMED = datetime(2026, 12, 2, 10, 0, 0, 400_000, tzinfo=UTC)
TEXT = "Hi jane! Here it is: https://sunny.example/loaf"


def _message(mid: str, at: datetime, *, text: str = TEXT, to: str = FAN) -> dict[str, Any]:
    return {
        "id": mid,
        "created_time": at.strftime("%Y-%m-%dT%H:%M:%S+0000"),
        "from": {"id": ACCOUNT},
        "to": {"data": [{"id": to}]},
        "message": text,
    }


def _sought(*, request_left: bool = True, message_id: str | None = None) -> Sought:
    return Sought(
        ig_user_id=ACCOUNT,
        recipient=FAN,
        text=TEXT,
        message_id=message_id,
        after=CLAIMED.replace(microsecond=0) if request_left else None,
        before=CLAIMED + timedelta(minutes=3) if request_left else None,
    )


def test_a_message_after_the_claim_from_the_account_to_the_person_matches_by_text() -> None:
    # Meta's timestamps have whole seconds: the claim's own second counts as after it.
    found = pick_match([_message("m2", CLAIMED.replace(microsecond=0))], _sought(), set())
    assert found.message is not None
    assert found.matched_on == "text"
    assert "after this DM was claimed" in found.why


def test_messages_that_cannot_be_this_rows_are_set_aside_with_the_reason() -> None:
    messages = [
        _message("m1", CLAIMED - timedelta(seconds=30)),
        _message("m3", CLAIMED + timedelta(seconds=2)),
        _message("m4", CLAIMED + timedelta(seconds=3), to=OTHER),
        _message("m5", CLAIMED + timedelta(hours=1)),
        _message("m6", CLAIMED + timedelta(seconds=4), text="something else"),
    ]
    found = pick_match(messages, _sought(), credited={"m3"})
    assert found.message is None
    assert found.set_aside == {
        "sent before this DM was claimed": 1,
        "already credited to another delivery": 1,
        "sent to someone else": 1,
        "sent after this DM's send window": 1,
    }
    assert "set aside" in found.miss_detail()


def test_no_text_match_when_the_request_never_left_but_the_id_still_matches() -> None:
    messages = [_message("m2", CLAIMED + timedelta(seconds=1))]
    assert pick_match(messages, _sought(request_left=False), set()).message is None
    by_id = pick_match(messages, _sought(request_left=False, message_id="m2"), set())
    assert by_id.matched_on == "message_id"


ALREADY_USED = Verdict(
    AttemptClass.REJECTED,
    "the comment is invalid for a private reply (already used, too old or ineligible)",
    final_state=LegState.FAILED,
    comment_already_used=True,
    code=100,
    subcode=2534025,
)


def _ctx(*, earlier_ambiguous: bool) -> AttemptContext:
    now = datetime.now(UTC)
    return AttemptContext(
        attempt_no=2,
        attempt_limit=4,
        now=now,
        deadline_at=now + timedelta(days=1),
        earlier_ambiguous=earlier_ambiguous,
    )


def test_2534025_is_proof_only_after_an_ambiguous_attempt() -> None:
    proven = failure_update(ALREADY_USED, _ctx(earlier_ambiguous=True))
    assert proven.state is LegState.SENT
    assert proven.evidence is not None
    assert proven.evidence["confirmed_by"] == "meta_already_used"
    refused = failure_update(ALREADY_USED, _ctx(earlier_ambiguous=False))
    assert refused.state is LegState.FAILED
    assert (refused.error_code, refused.error_subcode) == (100, 2534025)
    assert refused.evidence is None
    assert refused.release_person
