"""Every job the web can enqueue has a worker function, and every worker function has options."""

from __future__ import annotations

import pytest

from app.queue import JOB_SPECS
from worker.jobs import CRONS, FUNCTIONS


def test_specs_and_functions_match_both_ways() -> None:
    names = {fn.__qualname__ for fn in FUNCTIONS}
    assert set(JOB_SPECS) - names == set(), "job specs without a worker function"
    assert names - set(JOB_SPECS) == set(), "worker functions without a job spec"


def test_every_job_has_an_explicit_timeout_and_crons_are_registered() -> None:
    assert all(spec.timeout > 0 for spec in JOB_SPECS.values())
    assert {name for name, _ in CRONS} <= set(JOB_SPECS)


@pytest.mark.parametrize("send_timeout_s", [0.5, 10.0, 60.0, 120.0])
@pytest.mark.parametrize(
    "name",
    ["process_comment", "process_postback", "process_message", "send_follow_up"],
)
def test_a_sending_job_outlasts_its_calls(name: str, send_timeout_s: float) -> None:
    # Up to three calls under claims (a public reply, a message and its text fallback), each
    # as long as the send timeout, and time besides: SAQ must not cancel the job mid-send.
    assert JOB_SPECS[name].timeout_for(send_timeout_s) >= 3 * send_timeout_s + 20
