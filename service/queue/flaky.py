"""The flaky tests known per repository and backend: recorded when a job's result arrives
(in the transaction that stores it, `JobQueue.complete`), read by the dashboard's list and by
a later report, which marks a failing test known flaky ("known flaky: 3 of 10 recent jobs")."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from report.views import KnownFlaky
from service.db.engine import Database, utcnow
from service.db.models import FlakyTest, Job
from workflows.models import FailureClass, JobResult, JobStatus

KEPT_JOBS = 20  # the latest jobs kept per flaky test
RECENT_JOBS = 10  # a report's "N of 10 recent jobs"
LISTED = 200  # the dashboard's list, most recently seen first
_VERDICTS = (JobStatus.succeeded.value, JobStatus.failed.value)


@dataclass(frozen=True)
class FlakyRow:
    """One flaky test as the dashboard lists it."""

    repo: str
    backend: str
    op: str
    test_id: str
    flaky_jobs: int
    reruns: int
    rerun_failures: int
    last_seen_at: datetime
    job_ids: tuple[int, ...]

    @property
    def flake_rate(self) -> float | None:
        """The share of its re-runs that failed (None before any re-run)."""
        return self.rerun_failures / self.reruns if self.reruns else None


def record_flaky(session: Session, job: Job, result: JobResult) -> None:
    """Keep each test the job's re-runs found flaky. Two jobs may report the same test at
    once (on two replicas): the second updates the first's row."""
    found = result.failures
    if found is None:
        return
    for test in found.tests:
        if test.failure_class is not FailureClass.flaky:
            continue
        query = select(FlakyTest).where(
            FlakyTest.repo == job.repo,
            FlakyTest.backend == job.backend,
            FlakyTest.test_id == test.test_id,
        )
        row = session.scalars(query).first()
        if row is None:
            try:
                with session.begin_nested():
                    row = FlakyTest(
                        repo=job.repo, backend=job.backend, op=job.op, test_id=test.test_id,
                        flaky_jobs=0, reruns=0, rerun_failures=0, job_ids=[],
                        first_seen_at=utcnow(), last_seen_at=utcnow(),
                    )  # fmt: skip
                    session.add(row)
            except IntegrityError:
                row = session.scalars(query).one()
        if job.id in row.job_ids:
            continue  # the same result again
        row.op = job.op
        row.flaky_jobs += 1
        row.reruns += test.reruns
        row.rerun_failures += test.rerun_failures
        row.job_ids = [*row.job_ids, job.id][-KEPT_JOBS:]
        row.last_seen_at = utcnow()


def known_flaky(session: Session, job: Job, test_ids: Collection[str]) -> tuple[KnownFlaky, ...]:
    """Which of `test_ids` earlier jobs of this repository and backend found flaky, each with
    in how many of its operator's latest finished jobs (before this one) that was."""
    if not test_ids:
        return ()
    rows = session.scalars(
        select(FlakyTest).where(
            FlakyTest.repo == job.repo,
            FlakyTest.backend == job.backend,
            FlakyTest.test_id.in_(list(test_ids)[:500]),
        )
    ).all()
    known: list[KnownFlaky] = []
    recent_by_op: dict[str, list[int]] = {}
    for row in rows:
        if row.op not in recent_by_op:
            recent_by_op[row.op] = list(
                session.scalars(
                    select(Job.id)
                    .where(
                        Job.repo == job.repo, Job.op == row.op, Job.backend == job.backend,
                        Job.status.in_(_VERDICTS), Job.id != job.id,
                    )
                    .order_by(Job.id.desc())
                    .limit(RECENT_JOBS)
                )
            )  # fmt: skip
        recent = recent_by_op[row.op]
        flaky_jobs = len(set(recent) & set(row.job_ids))
        if flaky_jobs:
            known.append(KnownFlaky(row.test_id, flaky_jobs, len(recent)))
    return tuple(sorted(known, key=lambda k: k.test_id))


class FlakyTests:
    """The dashboard's list of flaky tests."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def listed(self, hidden_repos: Collection[str] = (), limit: int = LISTED) -> list[FlakyRow]:
        """The flaky tests most recently seen first, less those of `hidden_repos`."""
        with self.db.reads() as session:
            query = select(FlakyTest).order_by(FlakyTest.last_seen_at.desc(), FlakyTest.id)
            if hidden_repos:
                query = query.where(FlakyTest.repo.not_in(list(hidden_repos)))
            rows = session.scalars(query.limit(limit)).all()
            return [_row(r) for r in rows]


def _row(r: FlakyTest) -> FlakyRow:
    return FlakyRow(
        repo=r.repo,
        backend=r.backend,
        op=r.op,
        test_id=r.test_id,
        flaky_jobs=r.flaky_jobs,
        reruns=r.reruns,
        rerun_failures=r.rerun_failures,
        last_seen_at=r.last_seen_at,
        job_ids=tuple(r.job_ids),
    )
