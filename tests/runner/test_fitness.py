"""A runner's health from its jobs: whose fault each job's end was, when the jobs lost to the
runner drain it, and how it comes back (its environment check, an operator's undrain)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from runner.daemon.fitness import (
    DRAIN_FILE,
    Blame,
    Fitness,
    Outcome,
    blame,
    drained,
    environment_check,
    needs_check,
    outcome,
    read_drain,
    undrain,
)
from workflows.models import JobResult, JobStatus

SHA = "a" * 40


def result(status: JobStatus, step: str | None = None, message: str | None = None) -> JobResult:
    return JobResult(status=status, sha=SHA, error_step=step, error_message=message)


@pytest.mark.parametrize(
    ("status", "step", "message", "check", "expected"),
    [
        (JobStatus.succeeded, None, None, None, Blame.ran),
        (JobStatus.failed, None, None, None, Blame.ran),  # a test failure: the runner works
        # Tests that failed while the runner's environment broke under them: the runner's.
        (JobStatus.failed, None, None, "job Python gone", Blame.runner),
        (JobStatus.timed_out, "accuracy", "timed out", None, Blame.ran),
        (JobStatus.cancelled, "accuracy", "cancelled", None, Blame.job),
        (JobStatus.errored, "runner", "OSError: disk full", None, Blame.runner),
        (JobStatus.errored, "setup", "not an operator name: 'x y'", None, Blame.job),
        # The pull request's commit is gone (force-pushed away): not the runner's fault.
        (JobStatus.errored, "checkout", f"commit {SHA} not found in https://x/y", None, Blame.job),
        # A workspace the runner cannot make or clean is.
        (JobStatus.errored, "checkout", "git worktree add: 'src' exists", None, Blame.runner),
        # The environment: the runner's when its own check then fails, else the tree's.
        (JobStatus.errored, "environment", "venv: No such file", "Python gone", Blame.runner),
        (JobStatus.errored, "environment", "pip exited 1: no wheel for foo", None, Blame.job),
    ],
)  # fmt: skip
def test_whose_fault_a_jobs_end_was(
    status: JobStatus, step: str | None, message: str | None, check: str | None, expected: Blame
) -> None:
    assert blame(result(status, step, message), check) is expected


def test_errors_past_the_checkout_and_failures_wait_for_the_environment_check() -> None:
    assert needs_check(result(JobStatus.errored, "environment", "x"))
    assert needs_check(result(JobStatus.errored, "accuracy", "could not start"))
    assert not needs_check(result(JobStatus.errored, "checkout", "x"))
    assert not needs_check(result(JobStatus.errored, "runner", "x"))
    assert needs_check(result(JobStatus.failed))  # the check tells a broken runner's apart
    assert not needs_check(result(JobStatus.succeeded))


def _o(job_id: int, fault: Blame) -> Outcome:
    return Outcome(job_id, fault, "environment" if fault is Blame.runner else None, "gone")


def test_drained_after_the_limit_of_the_runners_faults_in_a_row() -> None:
    R, J, OK = Blame.runner, Blame.job, Blame.ran
    assert drained([_o(1, R), _o(2, R)], 3) is None
    drain = drained([_o(1, OK), _o(2, R), _o(3, J), _o(4, R), _o(5, R)], 3, now=7.0)
    assert drain is not None and drain.since == 7.0
    # A job's own error neither counts nor resets.
    assert [o.job_id for o in drain.jobs] == [2, 4, 5]
    assert "its last 3 jobs ended in infrastructure errors" in drain.reason
    assert "job 2 (environment: gone)" in drain.reason
    # What the service hears names no error (one may name a private repository).
    assert drain.summary == "drained: its last 3 jobs ended in infrastructure errors (2, 4, 5)"
    # A job that ran breaks the streak; a limit of 0 never drains.
    assert drained([_o(1, R), _o(2, R), _o(3, OK), _o(4, R)], 3) is None
    assert drained([_o(1, R)] * 5, 0) is None


def test_an_outcome_cuts_the_error_to_one_short_line() -> None:
    got = outcome(9, result(JobStatus.errored, "runner", "Boom:\n" + "x" * 900))
    assert got.blame is Blame.runner and got.step == "runner"
    assert got.error is not None and "\n" not in got.error and len(got.error) == 300


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_drain_is_kept_checked_again_and_lifted(tmp_path: Path) -> None:
    verdict: list[str | None] = ["job Python gone"]
    changes: list[tuple[bool, str]] = []
    clock = Clock()
    fit = Fitness(
        state_dir=tmp_path,
        limit=2,
        check=lambda: verdict[0],
        check_interval_s=60,
        on_change=lambda drain, why: changes.append((drain is not None, why)),
        clock=clock,
    )
    assert fit.record(_o(1, Blame.runner)) is None and fit.drain is None
    assert fit.record(_o(2, Blame.runner)) is not None
    assert fit.handed_back == [1, 2]  # never claimed here again
    assert changes == [(True, "")]
    # Recorded for `ondemand doctor runner`, and kept by a restarted daemon.
    recorded = read_drain(tmp_path / DRAIN_FILE)
    assert recorded is not None and [o.job_id for o in recorded.jobs] == [1, 2]
    again = Fitness(state_dir=tmp_path, limit=2, check=lambda: None, check_interval_s=60)
    assert again.drain is not None
    # Checked again only once the interval has passed, and lifted when the check passes.
    assert fit.poll() is not None
    clock.now += 61
    assert fit.poll() is not None  # still failing
    verdict[0] = None
    assert fit.poll() is not None  # not due yet
    clock.now += 61
    assert fit.poll() is None and fit.drain is None
    assert changes[-1] == (False, "undrained: its environment check passes")
    assert not (tmp_path / DRAIN_FILE).exists()
    # On probation: the next job lost to the runner drains it at once; one that ran ends it.
    assert fit.record(_o(3, Blame.runner)) is not None
    clock.now += 61
    assert fit.poll() is None
    fit.record(_o(4, Blame.ran))
    assert fit.record(_o(5, Blame.runner)) is None


def test_an_operator_undrains_by_removing_the_record(tmp_path: Path) -> None:
    fit = Fitness(state_dir=tmp_path, limit=1, check=lambda: "broken", check_interval_s=600)
    fit.record(_o(1, Blame.runner))
    assert fit.drain is not None
    was = undrain(tmp_path)  # `ondemand runner --undrain`
    assert was is not None and was.jobs[0].job_id == 1
    assert fit.poll() is None  # at once, though its own check still fails
    assert fit.record(_o(2, Blame.runner)) is not None  # no probation: the limit again (1)
    assert undrain(tmp_path / "elsewhere") is None


def test_the_environment_check_finds_a_missing_python_a_broken_directory_and_no_wheelhouse(
    tmp_path: Path,
) -> None:
    assert environment_check([Path(sys.executable)], [tmp_path]) is None
    gone = tmp_path / "gone" / "python"
    assert f"job Python {gone} does not run" in (environment_check([gone], []) or "")
    blocked = tmp_path / "slot-0"
    blocked.write_text("a file where the slot's directory was")
    assert f"{blocked} cannot be written" in (environment_check([], [blocked]) or "")
    wheelhouse = tmp_path / "wheels"  # where the jobs' missing packages come from: gone
    assert environment_check([], [], [wheelhouse]) == f"{wheelhouse} is not a directory any more"


def test_a_failure_on_a_broken_runner_says_the_check_not_the_tests() -> None:
    judged = outcome(7, result(JobStatus.failed), "job Python /x/python does not run")
    assert (judged.blame, judged.step, judged.error) == (
        Blame.runner,
        "environment",
        "job Python /x/python does not run",
    )
    assert outcome(7, result(JobStatus.failed)).blame is Blame.ran
