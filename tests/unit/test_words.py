"""Every state and every Meta refusal the log can show has words a creator understands."""

from __future__ import annotations

from app.db.models import AttemptClass, LegState
from app.delivery_log.words import CALL_RESULTS, STATE_WORDS, meta_refusal, state_words


def test_every_state_has_words_and_none_is_its_code() -> None:
    assert set(STATE_WORDS) == set(LegState)
    for state in LegState:
        words = state_words(state)
        assert words
        assert words != state.value
        assert "_" not in words


def test_meta_refusals_say_what_happened_without_the_code() -> None:
    assert meta_refusal(551) == "Instagram refused: this person can't receive messages"
    assert meta_refusal(100, 2534022) == meta_refusal(10)
    assert meta_refusal(12345) == "Instagram refused the message"
    assert meta_refusal(None) is None
    for code in (551, 10, 100, 200, 190, 368, 4, 613, 12345):
        assert str(code) not in (meta_refusal(code) or "")


def test_every_call_result_has_words() -> None:
    assert {c.value for c in AttemptClass} | {"open"} == set(CALL_RESULTS)
