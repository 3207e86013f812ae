"""The chaos run's pure logic: its verdict, its plan, and when it decides the run is over."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from bench.chaos.plan import (
    REPEAT_SHARE,
    conditional,
    message_faults,
    once_per_person,
    plan_comments,
    shape_for,
    webhook_faults,
)
from bench.chaos.progress import Snapshot, Watch
from bench.chaos.verdict import Observed, Row, judge

# --- verdict -----------------------------------------------------------------------------------


def observed(**overrides: object) -> Observed:
    base: dict[str, object] = {
        "comments": ["c1", "c2", "c3"],
        "rows": {"c1": Row("SENT", "m1"), "c2": Row("FAILED"), "c3": Row("SKIPPED_DEDUP")},
        "delivered": {"c1": ["m1"]},
    }
    base.update(overrides)
    return Observed(**base)  # type: ignore[arg-type]


def test_a_clean_run_is_ok() -> None:
    verdict = judge(observed())
    assert verdict["ok"] is True
    assert [verdict[k] for k in ("duplicates", "lost", "not_final", "false_sent")] == [0] * 4
    assert verdict["final_states"] == {"FAILED": 1, "SENT": 1, "SKIPPED_DEDUP": 1}
    assert verdict["examples"] == {}


def test_two_private_replies_to_one_comment_is_a_duplicate() -> None:
    verdict = judge(observed(delivered={"c1": ["m1", "m9"]}))
    assert verdict["duplicates"] == 1
    assert verdict["examples"]["duplicates"] == ["c1"]
    assert verdict["ok"] is False


def test_a_comment_without_a_row_is_lost() -> None:
    verdict = judge(observed(rows={"c1": Row("SENT", "m1"), "c2": Row("FAILED")}))
    assert verdict["lost"] == 1
    assert verdict["examples"]["lost"] == ["c3"]
    assert verdict["ok"] is False


@pytest.mark.parametrize("state", ["PENDING", "IN_FLIGHT"])
def test_a_row_still_moving_is_not_final(state: str) -> None:
    verdict = judge(observed(rows={**observed().rows, "c2": Row(state)}))
    assert verdict["not_final"] == 1
    assert verdict["ok"] is False


def test_sent_with_nothing_delivered_is_false_sent() -> None:
    verdict = judge(observed(delivered={}))
    assert verdict["false_sent"] == 1
    assert verdict["ok"] is False


def test_sent_with_another_comments_message_is_false_sent() -> None:
    # The fan got a message, but for c2; c1's row claims c2's message id.
    rows = {"c1": Row("SENT", "m2"), "c2": Row("SENT", "m2"), "c3": Row("SKIPPED_DEDUP")}
    verdict = judge(observed(rows=rows, delivered={"c1": ["m1"], "c2": ["m2"]}))
    assert verdict["false_sent"] == 1
    assert verdict["examples"]["false_sent"] == ["c1"]


def test_failed_but_delivered_is_a_wrong_answer() -> None:
    verdict = judge(observed(delivered={"c1": ["m1"], "c2": ["m2"]}))
    assert verdict["failed_delivered"] == 1
    assert verdict["ok"] is False


def test_unconfirmed_is_allowed_and_counted() -> None:
    rows = {
        "c1": Row("UNCONFIRMED", checked=True),
        "c2": Row("UNCONFIRMED", checked=False),
        "c3": Row("UNCONFIRMED", checked=True),
    }
    verdict = judge(observed(rows=rows, delivered={"c1": ["m1"], "c2": ["m2"]}))
    assert verdict["ok"] is True
    assert verdict["unconfirmed"] == 3
    assert verdict["unconfirmed_delivered"] == 2
    assert verdict["unconfirmed_unchecked"] == 1
    assert verdict["unconfirmed_missed_by_check"] == 1
    assert verdict["unconfirmed_examples"] == {
        "unconfirmed_unchecked": ["c2"],
        "unconfirmed_missed": ["c1"],
        "unconfirmed_undelivered": ["c3"],
    }


def test_only_comments_whose_webhook_never_came_count_as_recovered() -> None:
    verdict = judge(
        observed(
            seen_via={"c1": "poll", "c2": "poll", "c3": "webhook"},
            dropped={"c1"},
            given_up={"c3"},
            duplicated={"c2"},
        )
    )
    # c2 was first seen by the poll although its webhook came: not a recovery.
    assert verdict["recovered_by_reconciler"] == 1
    assert verdict["seen_first_by_poll"] == 2
    assert (verdict["webhooks_dropped"], verdict["webhooks_given_up"]) == (1, 1)
    assert verdict["webhooks_duplicated"] == 1


# --- plan --------------------------------------------------------------------------------------


def test_conditional_probabilities_give_the_overall_shares() -> None:
    shares = [0.1, 0.3]
    p = conditional(shares)
    assert p[0] == pytest.approx(0.1)
    assert (1 - p[0]) * p[1] == pytest.approx(0.3)
    with pytest.raises(ValueError, match="add up"):
        conditional([0.7, 0.5])


def test_fault_rules_in_order_reach_their_shares_by_simulation() -> None:
    rules = message_faults(3.0)
    rng = random.Random(7)
    fired: Counter[int] = Counter()
    trials = 100_000
    for _ in range(trials):
        for i, rule in enumerate(rules):
            if rng.random() < rule["probability"]:
                fired[i] += 1
                break
    for i, rule in enumerate(rules):
        assert fired[i] / trials == pytest.approx(rule["share"], abs=0.003)
    ambiguous = sum(r["share"] for r in rules if r["action"].startswith("deliver_then"))
    assert ambiguous == pytest.approx(0.05)
    assert [r["action"] for r in webhook_faults()] == ["drop", "duplicate"]


def test_plan_makes_the_number_of_comments_asked_with_only_deliberate_repeats() -> None:
    shape = shape_for(1000, per_post=100)
    planned = plan_comments(shape, random.Random(1))
    assert len(planned) == 1000
    per_post = Counter(c.post for c in planned)
    assert max(per_post.values()) <= 130  # about 100 a post, far under the reconciler's 800
    pairs = Counter((c.fan, c.post) for c in planned)
    repeats = sum(n - 1 for n in pairs.values())
    assert repeats == round(1000 * REPEAT_SHARE)
    assert max(pairs.values()) <= 3
    per_fan = Counter(c.fan for c in planned)
    assert max(per_fan.values()) <= 20  # the inbox check reads the 20 newest messages
    assert any(not once_per_person(p) for p in range(shape.posts))


# --- progress ----------------------------------------------------------------------------------


def settled(**overrides: object) -> Snapshot:
    base: dict[str, object] = {"states": {"SENT": 10}, "rows": 10, "ledger": 10}
    base.update(overrides)
    return Snapshot(**base)  # type: ignore[arg-type]


def test_the_run_ends_quiet_only_after_nothing_changed_for_the_quiet_period() -> None:
    watch = Watch(quiet_s=10, stall_s=300, check_grace_s=60)
    assert watch.verdict(settled(), 10, now=0) is None
    assert watch.verdict(settled(), 10, now=9) is None
    assert watch.verdict(settled(), 10, now=10) == "quiet"


def test_any_change_restarts_the_quiet_period() -> None:
    watch = Watch(quiet_s=10, stall_s=300, check_grace_s=60)
    watch.verdict(settled(), 10, now=0)
    assert watch.verdict(settled(last_update="later"), 10, now=9) is None
    assert watch.verdict(settled(last_update="later"), 10, now=18) is None
    assert watch.verdict(settled(last_update="later"), 10, now=19) == "quiet"


def test_unchecked_unconfirmed_rows_get_the_longer_grace() -> None:
    watch = Watch(quiet_s=10, stall_s=300, check_grace_s=60)
    snap = settled(states={"SENT": 9, "UNCONFIRMED": 1}, unchecked_unconfirmed=1)
    assert watch.verdict(snap, 10, now=0) is None
    assert watch.verdict(snap, 10, now=30) is None
    assert watch.verdict(snap, 10, now=60) == "quiet"


@pytest.mark.parametrize(
    "snap",
    [
        settled(states={"SENT": 9, "PENDING": 1}),
        settled(rows=9, states={"SENT": 9}),
        settled(webhooks_in_flight=2),
    ],
)
def test_pending_work_never_ends_quiet_only_stalled_after_the_bound(snap: Snapshot) -> None:
    watch = Watch(quiet_s=10, stall_s=300, check_grace_s=60)
    assert watch.verdict(snap, 10, now=0) is None
    assert watch.verdict(snap, 10, now=299) is None
    assert watch.verdict(snap, 10, now=300) == "stalled"
