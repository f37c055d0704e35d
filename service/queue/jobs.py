"""The jobs: create (deduplicated), claim, lease, complete, cancel, supersede, reap.

Every change happens in one transaction that also calls the `JobListener` (the report adds
its outbox rows there: a transactional outbox) and, after commit, wakes waiting claims and
calls `on_commit` (which kicks the outbox): `job_store.py`. Claiming and leases are
`job_leases.py`, results and cancels `job_results.py`; `JobQueue` composes them, and this
module makes jobs and reads them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Select, func, select
from sqlalchemy.exc import IntegrityError

from service.db.engine import utcnow
from service.db.models import ACTIVE_STATUSES, Job
from service.queue.job_leases import (
    MAX_ATTEMPTS,
    QUEUE_REFRESH,
    RUNNER_LOST,
    CancelState,
    Heartbeat,
    JobLeases,
)
from service.queue.job_results import RUNNER_REPORTABLE, JobResults
from service.queue.job_store import CLAIM_ACK_S, JobListener, job_channel
from workflows.models import JobOptions, JobSpec, JobStatus

__all__ = [
    "CLAIM_ACK_S",
    "MAX_ATTEMPTS",
    "QUEUE_REFRESH",
    "RUNNER_LOST",
    "RUNNER_REPORTABLE",
    "CancelState",
    "Heartbeat",
    "JobListener",
    "JobQueue",
    "NewJob",
    "job_channel",
    "job_spec",
]


@dataclass(frozen=True)
class NewJob:
    repo: str
    clone_url: str
    pr_number: int
    sha: str
    op: str
    backend: str
    bench: bool = True
    compare: bool = True
    exact_base: bool = False  # compare with base_sha itself, not the merge base
    profile: bool = False  # `/test profile`: the changed rows profiled after the comparison
    base_ref: str | None = None
    base_sha: str | None = None
    requested_by: str | None = None
    command_comment_id: int | None = None
    private: bool = False
    threshold: float = 0.1
    gate: str = "inform"
    trigger: str = "pull_request"  # or the default branch's own: push, nightly
    main_run_id: int | None = None


def job_spec(job: Job, lease_seconds: int, git_token: str | None = None) -> JobSpec:
    """The wire form of a claimed job (with a private repository's read token)."""
    return JobSpec(
        id=job.id,
        repo=job.repo,
        clone_url=job.clone_url,
        pr_number=job.pr_number,
        sha=job.sha,
        base_ref=job.base_ref,
        base_sha=job.base_sha,
        op=job.op,
        backend=job.backend,
        options=JobOptions(
            bench=job.bench, compare=job.compare, exact_base=job.exact_base, profile=job.profile
        ),
        lease_seconds=lease_seconds,
        attempt=job.attempt,
        git_token=git_token,
    )


class JobQueue(JobLeases, JobResults):
    """Every job state change; safe to call from many threads and processes."""

    def create_job(self, new: NewJob) -> tuple[Job, bool]:
        """Enqueue `new`, or return False with the job that stands for it: the one its command
        comment already created for this target (whatever its state: a command processed
        again after a crash creates only what it had not), else the queued or running job of
        the same (repo, PR, SHA, op, backend)."""
        try:
            with self._tx() as (session, pending):
                existing = None
                if new.command_comment_id is not None:
                    existing = session.scalars(self._same_command(new)).first()
                if existing is None:
                    existing = session.scalars(self._active_same(new)).first()
                if existing is not None:
                    return existing, False
                job = Job(
                    repo=new.repo,
                    clone_url=new.clone_url,
                    pr_number=new.pr_number,
                    sha=new.sha,
                    op=new.op,
                    backend=new.backend,
                    bench=new.bench,
                    compare=new.compare,
                    exact_base=new.exact_base,
                    profile=new.profile,
                    base_ref=new.base_ref,
                    base_sha=new.base_sha,
                    requested_by=new.requested_by,
                    command_comment_id=new.command_comment_id,
                    private=new.private,
                    threshold=new.threshold,
                    gate=new.gate,
                    trigger=new.trigger,
                    main_run_id=new.main_run_id,
                    status=JobStatus.queued,
                    attempt=1,
                    created_at=utcnow(),
                )
                session.add(job)
                self._changed(session, pending, job)
            return job, True
        except IntegrityError:
            # Lost a race with a concurrent create of the same job (PostgreSQL).
            with self.db.reads() as session:
                existing = session.scalars(self._active_same(new)).first()
            if existing is None:
                raise
            return existing, False

    @staticmethod
    def _same_command(new: NewJob) -> Select[tuple[Job]]:
        return (
            select(Job)
            .where(
                Job.command_comment_id == new.command_comment_id,
                Job.op == new.op,
                Job.backend == new.backend,
                Job.repo == new.repo,
                Job.pr_number == new.pr_number,
            )
            .order_by(Job.id)
        )

    @staticmethod
    def _active_same(new: NewJob) -> Select[tuple[Job]]:
        return select(Job).where(
            Job.repo == new.repo,
            Job.pr_number == new.pr_number,
            Job.sha == new.sha,
            Job.op == new.op,
            Job.backend == new.backend,
            Job.status.in_(ACTIVE_STATUSES),
        )

    def get_job(self, job_id: int) -> Job | None:
        with self.db.reads() as session:
            return session.get(Job, job_id)

    def latest_per_target(self, repo: str, pr_number: int) -> list[Job]:
        """The last job of each (op, backend) this PR has run, in order of first request."""
        with self.db.reads() as session:
            jobs = session.scalars(
                select(Job).where(Job.repo == repo, Job.pr_number == pr_number).order_by(Job.id)
            ).all()
        latest: dict[tuple[str, str], Job] = {}
        for job in jobs:
            latest[(job.op, job.backend)] = job
        return list(latest.values())

    def recent_repositories(self, backends: Sequence[str], limit: int = 5) -> list[str]:
        """The clone URLs of the repositories last tested on `backends`, newest first: where
        a runner of those backends fetches from (its doctor checks it can)."""
        query = (
            select(Job.clone_url, func.max(Job.id).label("newest"))
            .where(Job.backend.in_(list(backends)))
            .group_by(Job.clone_url)
            .order_by(func.max(Job.id).desc())
            .limit(limit)
        )
        with self.db.reads() as session:
            return [url for url, _ in session.execute(query)]
