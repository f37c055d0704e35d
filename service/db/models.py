"""The service's tables (SQLAlchemy 2 typed ORM). The schema itself is made by the Alembic
migrations in `service/db/migrations/`; a test checks that the two agree."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from service.db.engine import Base, UTCDateTime, utcnow

ACTIVE_STATUSES = ("queued", "running")
NO_PULL = 0  # a default-branch job's `pr_number`: GitHub numbers pull requests from 1
MAIN_TRIGGERS = ("push", "nightly")  # the default branch's own runs
_ACTIVE_SQL = "status IN ('queued', 'running')"
LOGGED_SQL = "log_size > 0"  # a job whose log has chunks stored (the pruner's partial index)


class LeasedRow:
    """The columns of a row that a worker takes, tries and finishes or retries (the inbox's
    deliveries and the outbox's items: `service/db/leases.py`)."""

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    locked_until: Mapped[datetime | None] = mapped_column(UTCDateTime)
    done_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    outcome: Mapped[str | None] = mapped_column(Text)
    last_error: Mapped[str | None] = mapped_column(Text)
    # Parked: GitHub refused it for a permission the App lacks (`contents:read`); it waits.
    waiting_for: Mapped[str | None] = mapped_column(String(100))


class Delivery(LeasedRow, Base):
    """One webhook delivery: the durable inbox. `delivery_id` is GitHub's `X-GitHub-Delivery`."""

    __tablename__ = "deliveries"
    __table_args__ = (Index("ix_deliveries_done_at", "done_at"),)

    delivery_id: Mapped[str] = mapped_column(String(100), unique=True)
    event: Mapped[str] = mapped_column(String(100))
    action: Mapped[str | None] = mapped_column(String(100))
    payload: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    received_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class Runner(Base):
    """A registered runner daemon; its bearer token is stored only as a SHA-256 hash."""

    __tablename__ = "runners"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    backends: Mapped[list[str]] = mapped_column(JSON, default=list)
    labels: Mapped[list[str]] = mapped_column(JSON, default=list)
    slots: Mapped[int] = mapped_column(Integer, default=1)
    version: Mapped[str | None] = mapped_column(String(100))
    healthy: Mapped[bool] = mapped_column(Boolean, default=True)
    health_reason: Mapped[str | None] = mapped_column(Text)
    # Drained by its jobs' infrastructure errors, as it reported: {"since": epoch seconds,
    # "jobs": [{"id", "step", "error"}]}; None when not drained.
    drained: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    last_seen_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    removed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)  # deregistered


class Job(Base):
    """One (operator, backend) run on one pinned commit of a pull request."""

    __tablename__ = "jobs"
    __table_args__ = (
        Index("ix_jobs_queue", "status", "backend", "id"),
        Index("ix_jobs_pr", "repo", "pr_number"),
        Index("ix_jobs_command", "command_comment_id", "op", "backend"),
        # At most one queued-or-running job per (repo, PR, SHA, op, backend): the dedupe.
        Index(
            "uq_jobs_active",
            "repo",
            "pr_number",
            "sha",
            "op",
            "backend",
            unique=True,
            sqlite_where=text(_ACTIVE_SQL),
            postgresql_where=text(_ACTIVE_SQL),
        ),
        # The pruner's: finished jobs by age, those with a stored log by age, and each
        # (repository, operator, backend)'s jobs by id (is there a newer verdict?).
        Index("ix_jobs_finished", "finished_at"),
        Index(
            "ix_jobs_logged",
            "finished_at",
            sqlite_where=text(LOGGED_SQL),
            postgresql_where=text(LOGGED_SQL),
        ),
        Index("ix_jobs_target", "repo", "op", "backend", "id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    repo: Mapped[str] = mapped_column(String(200))
    clone_url: Mapped[str] = mapped_column(Text)
    pr_number: Mapped[int] = mapped_column(Integer)
    sha: Mapped[str] = mapped_column(String(64))
    base_ref: Mapped[str | None] = mapped_column(String(255))
    base_sha: Mapped[str | None] = mapped_column(String(64))
    op: Mapped[str] = mapped_column(String(64))
    backend: Mapped[str] = mapped_column(String(64))
    bench: Mapped[bool] = mapped_column(Boolean, default=True)
    compare: Mapped[bool] = mapped_column(Boolean, default=True)
    # `/test ... vs REF`: compared with base_sha itself, not the merge base (migration 0017)
    exact_base: Mapped[bool] = mapped_column(Boolean, default=False)
    # `/test profile`: the changed rows profiled after the comparison (migration 0019)
    profile: Mapped[bool] = mapped_column(Boolean, default=False)
    # What started it (migration 0018): `pull_request` (a command, a push to a pull request, a
    # merge queue, a Re-run), or the default branch's own runs, `push` and `nightly`, which
    # have no pull request (`pr_number` NO_PULL) and belong to a `MainRun`.
    trigger: Mapped[str] = mapped_column(
        String(20), default="pull_request", server_default="pull_request"
    )
    main_run_id: Mapped[int | None] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(20), default="queued")
    attempt: Mapped[int] = mapped_column(Integer, default=1)
    requested_by: Mapped[str | None] = mapped_column(String(200))
    command_comment_id: Mapped[int | None] = mapped_column(BigInteger)
    runner_id: Mapped[int | None] = mapped_column(ForeignKey("runners.id"))
    runner_name: Mapped[str | None] = mapped_column(String(200))
    lease_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    acked_at: Mapped[datetime | None] = mapped_column(UTCDateTime)  # first heartbeat of a claim
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    reason: Mapped[str | None] = mapped_column(Text)
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    progress: Mapped[dict[str, Any] | None] = mapped_column(JSON)  # its runner's latest
    progress_noticed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)  # comment paced
    check_run_id: Mapped[int | None] = mapped_column(BigInteger)  # as a GitHub App
    check_sent_digest: Mapped[str | None] = mapped_column(String(64))  # what was last sent
    # The repository's regression gate for the operator, from its settings file on the base.
    threshold: Mapped[float] = mapped_column(Float, default=0.1, server_default="0.1")
    gate: Mapped[str] = mapped_column(String(16), default="inform", server_default="inform")
    accepted_by: Mapped[str | None] = mapped_column(String(200))  # a maintainer's acceptance
    accepted_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    log_size: Mapped[int] = mapped_column(Integer, default=0)  # bytes stored (0 once pruned)
    log_pruned_at: Mapped[datetime | None] = mapped_column(UTCDateTime)  # retention took it
    private: Mapped[bool] = mapped_column(Boolean, default=False)  # its repository's
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class LogChunk(Base):
    """A piece of a job's log at a byte offset; the log is the chunks in offset order."""

    __tablename__ = "log_chunks"
    __table_args__ = (UniqueConstraint("job_id", "offset", name="uq_log_chunks_offset"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    offset: Mapped[int] = mapped_column(Integer)
    data: Mapped[bytes] = mapped_column(LargeBinary)


class JobArtifact(Base):
    """A file a runner uploaded for a job (a profile's trace, gzip), by its name; pruned with
    the job (migration 0019)."""

    __tablename__ = "job_artifacts"
    __table_args__ = (UniqueConstraint("job_id", "name", name="uq_job_artifacts_name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(200))
    data: Mapped[bytes] = mapped_column(LargeBinary)
    size: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class ResultComment(Base):
    """The one result comment per (repo, PR, op, backend) and its GitHub id once created."""

    __tablename__ = "result_comments"
    __table_args__ = (
        UniqueConstraint("repo", "pr_number", "op", "backend", name="uq_result_comments"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    repo: Mapped[str] = mapped_column(String(200))
    pr_number: Mapped[int] = mapped_column(Integer)
    op: Mapped[str] = mapped_column(String(64))
    backend: Mapped[str] = mapped_column(String(64))
    github_comment_id: Mapped[int | None] = mapped_column(BigInteger)
    # The digest of the body last sent: an edit that would change nothing is not sent (each
    # costs one call of the installation's hourly budget).
    sent_digest: Mapped[str | None] = mapped_column(String(64))
    # The job the comment showed when last sent: while the hourly budget runs low, an edit of
    # a comment that already shows its job is left out until the job ends.
    sent_job_id: Mapped[int | None] = mapped_column(Integer)


class HeadCheck(Base):
    """The one aggregate check (`ondemand`) of a tested head: a pull request's head or a merge
    group's, its GitHub id once created and what was last sent; `idle_reason` says why no job was
    needed where none ran (a selection that found no operator, a merge queue that runs none)."""

    __tablename__ = "head_checks"
    __table_args__ = (UniqueConstraint("repo", "sha", name="uq_head_checks"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    repo: Mapped[str] = mapped_column(String(200))
    sha: Mapped[str] = mapped_column(String(64))
    idle_reason: Mapped[str | None] = mapped_column(String(200))
    check_run_id: Mapped[int | None] = mapped_column(BigInteger)
    check_sent_digest: Mapped[str | None] = mapped_column(String(64))  # as a job's
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class OutboxItem(LeasedRow, Base):
    """One thing to tell GitHub (reaction, reply, result comment, commit status).

    Items with the same `key` are delivered in id order; `dedupe_key` makes enqueueing the same
    one-shot item twice (a re-processed delivery) a no-op."""

    __tablename__ = "outbox"
    __table_args__ = (Index("ix_outbox_pending", "done_at", "next_attempt_at"),)

    kind: Mapped[str] = mapped_column(String(20))
    key: Mapped[str] = mapped_column(String(300), index=True)
    dedupe_key: Mapped[str | None] = mapped_column(String(300), unique=True)
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class PullHead(Base):
    """A head a pull request had: from a `pull_request` event (`seen` false, `since` is
    GitHub's time of the change) or as the service read it (`seen` true, `since` is when it was
    read). An approval binds to the head the PR had when the command was written."""

    __tablename__ = "pull_heads"
    __table_args__ = (
        Index("ix_pull_heads_pr", "repo", "pr_number"),
        UniqueConstraint("repo", "pr_number", "sha", "since", "seen", name="uq_pull_heads"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    repo: Mapped[str] = mapped_column(String(200))
    pr_number: Mapped[int] = mapped_column(Integer)
    sha: Mapped[str] = mapped_column(String(64))
    since: Mapped[datetime] = mapped_column(UTCDateTime)
    seen: Mapped[bool] = mapped_column(Boolean, default=False)
    event: Mapped[str] = mapped_column(String(20))  # opened, reopened, synchronize, read


class KnownOperators(Base):
    """The operators a commit's tests know, as a runner found them (its accuracy step's
    markers): what lets the service answer a misspelt operator at once."""

    __tablename__ = "known_operators"
    __table_args__ = (UniqueConstraint("repo", "sha", name="uq_known_operators"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    repo: Mapped[str] = mapped_column(String(200))
    sha: Mapped[str] = mapped_column(String(64))
    operators: Mapped[list[str]] = mapped_column(JSON)
    reported_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)


class FlakyTest(Base):
    """A test that a job's re-runs found flaky (it failed, then passed a re-run on the same
    commit), per repository and backend: how many jobs found it so, its re-runs and how many
    of them failed (its flake rate), when it was last seen and the latest jobs that saw it
    (`service/queue/flaky.py`). A later report marks it known flaky."""

    __tablename__ = "flaky_tests"
    __table_args__ = (
        UniqueConstraint("repo", "backend", "test_id", name="uq_flaky_tests"),
        Index("ix_flaky_tests_seen", "repo", "backend", "last_seen_at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    repo: Mapped[str] = mapped_column(String(200))
    backend: Mapped[str] = mapped_column(String(64))
    op: Mapped[str] = mapped_column(String(64))
    test_id: Mapped[str] = mapped_column(String(1000))
    flaky_jobs: Mapped[int] = mapped_column(Integer, default=0)
    reruns: Mapped[int] = mapped_column(Integer, default=0)
    rerun_failures: Mapped[int] = mapped_column(Integer, default=0)
    job_ids: Mapped[list[int]] = mapped_column(JSON, default=list)  # the latest, newest last
    first_seen_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    last_seen_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class MainRun(Base):
    """One run of the default branch's own: a push to it (`key` `push:<sha>`) or a night
    (`nightly:<date>`), its commit, the commit before it, the pull request it merged (if any)
    and when all its jobs were created (`settled_at`; a run left unsettled by a crash is
    settled again)."""

    __tablename__ = "main_runs"
    __table_args__ = (UniqueConstraint("repo", "key", name="uq_main_runs"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    repo: Mapped[str] = mapped_column(String(200))
    key: Mapped[str] = mapped_column(String(100))
    trigger: Mapped[str] = mapped_column(String(20))
    sha: Mapped[str] = mapped_column(String(64))
    before_sha: Mapped[str | None] = mapped_column(String(64))
    pull_number: Mapped[int | None] = mapped_column(Integer)
    pusher: Mapped[str | None] = mapped_column(String(200))
    clone_url: Mapped[str] = mapped_column(Text)
    private: Mapped[bool] = mapped_column(Boolean, default=False)
    default_branch: Mapped[str] = mapped_column(String(255))
    # What its settings (at `sha`) said when it began: where a regression is said
    # (`main.alerts`) and the drift test's window, for its jobs' results to use.
    alerts: Mapped[list[str]] = mapped_column(JSON, default=list)
    drift_window: Mapped[int] = mapped_column(Integer, default=8)
    outcome: Mapped[str | None] = mapped_column(Text)
    settled_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class MainSchedule(Base):
    """A repository whose default branch runs once a night (`main.nightly`, as its last push
    said), and the last night it ran: the state that keeps a restart from skipping or
    doubling a night."""

    __tablename__ = "main_schedules"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    repo: Mapped[str] = mapped_column(String(200), unique=True)
    clone_url: Mapped[str] = mapped_column(Text)
    private: Mapped[bool] = mapped_column(Boolean, default=False)
    default_branch: Mapped[str] = mapped_column(String(255))
    nightly: Mapped[str] = mapped_column(String(10), default="none")
    last_night: Mapped[str | None] = mapped_column(String(10))  # YYYY-MM-DD, UTC
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class HistoryPoint(Base):
    """One row's result of one default-branch run: a point of the series (repository,
    operator, backend, dtype, shape, metric: its device time, or a host-bound row's host time
    over processes), the change from the commit it was compared with
    (`base_sha`) to its commit, its interval and verdict, and `mark` where an alert starts
    anew from it (a row flagged on its own, or a drift found over the window)."""

    __tablename__ = "history_points"
    __table_args__ = (
        UniqueConstraint(
            "repo",
            "op",
            "backend",
            "dtype",
            "shape",
            "metric",
            "sha",
            "base_sha",
            name="uq_history_points",
        ),
        Index("ix_history_series", "repo", "op", "backend", "dtype", "shape", "metric", "id"),
        Index("ix_history_points_job", "job_id"),  # is a job's result recorded?
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    repo: Mapped[str] = mapped_column(String(200))
    op: Mapped[str] = mapped_column(String(64))
    backend: Mapped[str] = mapped_column(String(64))
    dtype: Mapped[str] = mapped_column(String(32))
    shape: Mapped[str] = mapped_column(String(200))
    metric: Mapped[str] = mapped_column(String(8))  # device, or host (a host-bound row's)
    sha: Mapped[str] = mapped_column(String(64))
    base_sha: Mapped[str] = mapped_column(String(64))
    job_id: Mapped[int] = mapped_column(Integer)
    rounds: Mapped[int] = mapped_column(Integer)
    ratio: Mapped[float] = mapped_column(Float)
    low: Mapped[float | None] = mapped_column(Float)
    high: Mapped[float | None] = mapped_column(Float)
    # the point's timing: ms a call for a device point, µs of host time a call for a host one
    value: Mapped[float | None] = mapped_column(Float)
    threshold: Mapped[float] = mapped_column(Float)
    verdict: Mapped[str] = mapped_column(String(16))
    mark: Mapped[str | None] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


OPEN_SQL = "state = 'open'"


class RegressionIssue(Base):
    """The one open issue per (repository, operator, backend) that says which rows the
    default branch got slower, updated as later runs find more and closed when they recover
    (`rows`: each row's series, the point its slowdown is counted from and what was found);
    its GitHub number once made and the digest of what was last sent."""

    __tablename__ = "regression_issues"
    __table_args__ = (
        Index(
            "uq_regression_issues_open",
            "repo",
            "op",
            "backend",
            unique=True,
            sqlite_where=text(OPEN_SQL),
            postgresql_where=text(OPEN_SQL),
        ),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    repo: Mapped[str] = mapped_column(String(200))
    op: Mapped[str] = mapped_column(String(64))
    backend: Mapped[str] = mapped_column(String(64))
    state: Mapped[str] = mapped_column(String(10), default="open")
    rows: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    issue_number: Mapped[int | None] = mapped_column(BigInteger)
    sent_digest: Mapped[str | None] = mapped_column(String(64))
    opened_job_id: Mapped[int] = mapped_column(Integer)
    closed_job_id: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    closed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
