"""Builders shared by the web tests: jobs taken through the queue as a runner would."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from service.queue.jobs import NewJob
from tests.service.helpers import LiveService
from workflows.models import (
    AccuracyResult,
    BenchmarkResult,
    BenchmarkRow,
    JobResult,
    JobStatus,
    Rounds,
    StepResult,
    StepStatus,
    TestFailure,
)

HOSTILE = "<script>alert('owned')</script><img src=x onerror=alert(2)>"


def new_job(
    repo: str = "octo/kernels",
    op: str = "add",
    backend: str = "cpu",
    sha: str = "a" * 40,
    pr: int = 1,
    private: bool = False,
    base_sha: str | None = None,
) -> NewJob:
    return NewJob(
        repo=repo,
        clone_url="/tmp/none.git",
        pr_number=pr,
        sha=sha,
        op=op,
        backend=backend,
        private=private,
        base_sha=base_sha,
    )


def result(
    sha: str,
    speedups: tuple[float, ...] = (1.5, 0.8),
    performance: bool = True,
    failed: bool = True,
    rounds: Rounds | None = None,
    before: Rounds | None = None,
) -> JobResult:
    """A finished run: three tests (one failure whose message is hostile HTML when `failed`),
    a benchmark with a row per speedup and, from a comparison, the geometric mean's `rounds`
    of the pull request and those of its merge base (`before`)."""
    now = datetime.now(UTC)
    failures = [TestFailure(test_id="tests/test_add.py::test_bad", message=HOSTILE)]
    rows = [
        BenchmarkRow(dtype="float32", size=[1, 2 + i], reference_ms=1.0, kernel_ms=1 / s, speedup=s)
        for i, s in enumerate(speedups)
    ]
    return JobResult(
        status=JobStatus.failed if failed else JobStatus.succeeded,
        sha=sha,
        steps=[
            StepResult(name="checkout", status=StepStatus.succeeded, duration_s=0.4),
            StepResult(name="environment", status=StepStatus.succeeded, duration_s=1.2),
            StepResult(
                name="accuracy",
                status=StepStatus.failed if failed else StepStatus.succeeded,
                duration_s=12.5,
            ),
            StepResult(name="benchmark", status=StepStatus.succeeded, duration_s=3.0),
        ],
        accuracy=AccuracyResult(passed=2, failed=int(failed), failures=failures if failed else []),
        benchmark=BenchmarkResult(
            op="add",
            rows=rows,
            geometric_mean_speedup=BenchmarkResult.means(list(speedups))[1],
            geometric_mean_rounds=rounds,
            before_geometric_mean_rounds=before,
            performance=performance,
        ),
        started_at=now - timedelta(seconds=20),
        finished_at=now,
    )


def run_job(live: LiveService, runner: tuple[int, str], job_id: int, log: bytes = b"") -> None:
    """Claim `job_id` for `runner` (the only queued job of its backend), heartbeat, log."""
    runner_id, _ = runner
    job = live.service.jobs.get_job(job_id)
    assert job is not None
    claimed = live.service.jobs.claim(runner_id, [job.backend])
    assert claimed is not None and claimed.id == job_id
    assert live.service.jobs.heartbeat(runner_id, job_id) is not None
    if log:
        assert live.service.logs.append(runner_id, job_id, 0, log) is not None


def finish_job(live: LiveService, runner: tuple[int, str], job_id: int, done: JobResult) -> None:
    assert live.service.jobs.complete(runner[0], job_id, done) is not None
