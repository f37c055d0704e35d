"""The plain data the report takes and gives: a job as the service sees it (the runner's
`ondemand run` makes one of its own result), and the comment, commit status and check run
rendered from it. Built by the service from its store; no I/O here."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from workflows.models import JobResult, JobStatus, Progress


@dataclass(frozen=True)
class KnownFlaky:
    """A test the dashboard knows as flaky on this repository and backend: in how many of
    the operator's recent finished jobs its re-runs found it flaky."""

    test_id: str
    flaky_jobs: int
    recent_jobs: int


@dataclass(frozen=True)
class JobView:
    """One job of one (PR, operator, backend), with what the runner reported if it finished.

    `reason` is the service's own word on the job ("runner lost", "superseded by abc1234",
    "cancelled by @x"); `queue_position` is 1-based among queued jobs of the backend.
    While it runs: `progress` is what its runner last streamed, `estimate_s` how long this
    operator's past jobs on the backend took (None without history), and `now` the moment
    the view was made (the elapsed time is counted to it).
    """

    id: int
    repo: str
    pr_number: int
    op: str
    backend: str
    sha: str
    status: JobStatus
    bench: bool
    compare: bool
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    runner_name: str | None
    queue_position: int | None
    runners_online: int
    job_url: str
    log_url: str
    result: JobResult | None
    reason: str | None
    attempt: int = 1
    progress: Progress | None = None
    estimate_s: float | None = None
    now: datetime | None = None
    # The repository's regression gate for this operator (its settings file on the base):
    # a change beyond `threshold` is significant; with gate "fail" a significant regression
    # fails the status, unless a maintainer accepted it (`accepted_by`).
    threshold: float = 0.10
    gate: str = "inform"
    accepted_by: str | None = None
    # The branch the pull request goes into (the report's "already failing on main"), and
    # which of its failing tests are known flaky here (`service/queue/flaky.py`).
    base_ref: str | None = None
    known_flaky: tuple[KnownFlaky, ...] = ()
    # `/test ... vs REF`: compared with that commit (`base_sha`) itself, not the merge base.
    exact_base: bool = False
    base_sha: str | None = None


@dataclass(frozen=True)
class StatusUpdate:
    """A commit status: state is pending, success, failure or error."""

    state: str
    description: str
    context: str
    target_url: str


@dataclass(frozen=True)
class CommentUpdate:
    """A result comment now: its text, the job it shows (its target's latest) and whether
    that job has ended."""

    body: str
    job_id: int
    ended: bool


@dataclass(frozen=True)
class CheckRunUpdate:
    """A GitHub check run of a job (as an App): `status` queued, in_progress or completed;
    `conclusion` only when completed; the output's title, summary and text."""

    name: str
    head_sha: str
    external_id: str
    details_url: str
    status: str
    conclusion: str | None
    title: str
    summary: str
    text: str
