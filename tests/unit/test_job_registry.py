"""One table of jobs: every job name has exactly one entry, whose function SAQ registers under
that name, with explicit options; the worker refuses to start from a table that disagrees."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from app.jobs.registry import JOB_OPTIONS, JOBS, RegisteredJob, registry_problems
from app.queue import JobName
from app.settings import Settings, load_settings
from tests.support.infra import base_env
from worker.runner import WorkerConfigError, build_worker

SENDING_JOBS = [
    JobName.PROCESS_COMMENT,
    JobName.PROCESS_POSTBACK,
    JobName.PROCESS_MESSAGE,
    JobName.SEND_FOLLOW_UP,
]


@pytest.fixture
def settings() -> Settings:
    # Building a worker connects to nothing: these URLs are never dialled.
    return load_settings(base_env("postgresql://127.0.0.1:1/unused", "redis://127.0.0.1:1/0"))


def test_every_job_name_has_one_entry_registered_under_its_name() -> None:
    assert registry_problems(JOBS) == []
    assert sorted(job.name for job in JOBS) == sorted(JobName)
    assert {job.function.__qualname__ for job in JOBS} == set(JobName)
    assert set(JOB_OPTIONS) == set(JobName)


def test_the_worker_builds_from_the_registry(settings: Settings) -> None:
    # SAQ checks every cron schedule here; our check finds nothing to refuse.
    build_worker(settings)


def _without_first(jobs: list[RegisteredJob]) -> list[RegisteredJob]:
    return jobs[1:]


def _functions_swapped(jobs: list[RegisteredJob]) -> list[RegisteredJob]:
    first, second, *rest = jobs
    return [
        dataclasses.replace(first, function=second.function),
        dataclasses.replace(second, function=first.function),
        *rest,
    ]


def _first_twice(jobs: list[RegisteredJob]) -> list[RegisteredJob]:
    return [jobs[0], *jobs]


@pytest.mark.parametrize(
    ("break_registry", "problem"),
    [
        (_without_first, f"job {JOBS[0].name.value} has no entry"),
        (_functions_swapped, f"job {JOBS[0].name.value} has function {JOBS[1].name.value}"),
        (_first_twice, f"job {JOBS[0].name.value} is registered twice"),
    ],
)
def test_the_worker_refuses_to_start_from_a_registry_that_disagrees(
    settings: Settings,
    break_registry: Callable[[list[RegisteredJob]], list[RegisteredJob]],
    problem: str,
) -> None:
    broken = break_registry(list(JOBS))
    assert any(found.startswith(problem) for found in registry_problems(broken))
    with pytest.raises(WorkerConfigError, match=problem):
        build_worker(settings, jobs=broken)


def test_every_job_has_an_explicit_timeout() -> None:
    assert all(options.timeout > 0 for options in JOB_OPTIONS.values())


@pytest.mark.parametrize("name", [*SENDING_JOBS, JobName.VERIFY_UNCONFIRMED])
def test_delivery_jobs_are_never_retried_by_saq(name: JobName) -> None:
    # Their attempt budget lives in the dm_logs row, where no new job id can reset it.
    assert JOB_OPTIONS[name].retries == 1


@pytest.mark.parametrize("send_timeout_s", [0.5, 10.0, 60.0, 120.0])
@pytest.mark.parametrize("name", SENDING_JOBS)
def test_a_sending_job_outlasts_its_calls(name: JobName, send_timeout_s: float) -> None:
    # Up to three calls under claims (a public reply, a message and its text fallback), each
    # as long as the send timeout, and time besides: SAQ must not cancel the job mid-send.
    assert JOB_OPTIONS[name].timeout_for(send_timeout_s) >= 3 * send_timeout_s + 20
