"""Every job the web can enqueue has a worker function, and every worker function has options."""

from __future__ import annotations

from app.queue import JOB_SPECS
from worker.jobs import CRONS, FUNCTIONS


def test_specs_and_functions_match_both_ways() -> None:
    names = {fn.__qualname__ for fn in FUNCTIONS}
    assert set(JOB_SPECS) - names == set(), "job specs without a worker function"
    assert names - set(JOB_SPECS) == set(), "worker functions without a job spec"


def test_every_job_has_an_explicit_timeout_and_crons_are_registered() -> None:
    assert all(spec.timeout > 0 for spec in JOB_SPECS.values())
    assert {name for name, _ in CRONS} <= set(JOB_SPECS)
