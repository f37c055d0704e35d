"""The job store and queue: create (with dedupe), claim, lease, logs, complete, cancel.

Every state change happens in one transaction that also calls the `JobListener` (the reporter
adds its outbox rows there: a transactional outbox) and, after commit, wakes waiting claims.
SQLite claims with one `UPDATE … RETURNING`; PostgreSQL adds `FOR UPDATE SKIP LOCKED`.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from sqlalchemy import func, select, text, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from service.db import make_sessionmaker, utcnow
from service.models import ACTIVE_STATUSES, Job, LogChunk, Runner
from service.wakeup import CHANNEL, Wakeup
from workflows.models import JobOptions, JobResult, JobSpec, JobStatus

RUNNER_REPORTABLE = frozenset(
    {
        JobStatus.succeeded,
        JobStatus.failed,
        JobStatus.errored,
        JobStatus.cancelled,
        JobStatus.timed_out,
    }
)
RUNNER_LOST = "runner lost"
QUEUE_REFRESH = 10  # queued jobs whose comments show their new position after a claim


class JobListener(Protocol):
    def job_changed(self, session: Session, job: Job) -> None:
        """Called inside the transaction that changed `job` (after flush)."""

    def queue_moved(self, session: Session, jobs: Sequence[Job]) -> None:
        """Called when queued `jobs` moved up (a job ahead of them left the queue)."""


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
    base_ref: str | None = None
    base_sha: str | None = None
    requested_by: str | None = None
    command_comment_id: int | None = None


@dataclass(frozen=True)
class Heartbeat:
    cancel: bool
    reason: str | None
    lease_expires_at: datetime


@dataclass(frozen=True)
class LogAppend:
    accepted: bool  # False: a gap or a disagreeing overlap; `offset` is the right one
    offset: int


@dataclass
class _Pending:
    backends: set[str] = field(default_factory=set)
    changed: bool = False


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def job_spec(job: Job, lease_seconds: int) -> JobSpec:
    """The wire form of a claimed job."""
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
        options=JobOptions(bench=job.bench, compare=job.compare),
        lease_seconds=lease_seconds,
        attempt=job.attempt,
    )


class Store:
    """All job, runner and log state; safe to call from many threads and processes."""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        *,
        lease_seconds: int = 120,
        runner_online_seconds: float = 90.0,
        wakeup: Wakeup | None = None,
        listener: JobListener | None = None,
        on_commit: Callable[[], None] | None = None,
    ) -> None:
        self.sessions = sessions
        self.writes = make_sessionmaker(sessions.kw["bind"], write=True)
        self.lease_seconds = lease_seconds
        self.runner_online_seconds = runner_online_seconds
        self.wakeup = wakeup or Wakeup()
        self.listener = listener
        self.on_commit = on_commit
        self.postgres = sessions.kw["bind"].dialect.name == "postgresql"

    # -- transactions -------------------------------------------------------------------

    @contextmanager
    def _tx(self) -> Iterator[tuple[Session, _Pending]]:
        pending = _Pending()
        with self.writes() as session, session.begin():
            yield session, pending
            for backend in pending.backends:
                if self.postgres:
                    session.execute(text("SELECT pg_notify(:c, :b)"), {"c": CHANNEL, "b": backend})
        for backend in pending.backends:
            self.wakeup.notify(backend)
        if pending.changed and self.on_commit is not None:
            self.on_commit()

    def _changed(self, session: Session, pending: _Pending, job: Job) -> None:
        session.flush()
        pending.changed = True
        if job.status == JobStatus.queued:
            pending.backends.add(job.backend)
        if self.listener is not None:
            self.listener.job_changed(session, job)

    def _lock(self, stmt: Any) -> Any:
        return stmt.with_for_update() if self.postgres else stmt

    # -- jobs ---------------------------------------------------------------------------

    def create_job(self, new: NewJob) -> tuple[Job, bool]:
        """Enqueue `new`, or return the queued/running job of the same (repo, PR, SHA, op,
        backend) and False."""
        try:
            with self._tx() as (session, pending):
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
                    base_ref=new.base_ref,
                    base_sha=new.base_sha,
                    requested_by=new.requested_by,
                    command_comment_id=new.command_comment_id,
                    status=JobStatus.queued,
                    attempt=1,
                    created_at=utcnow(),
                )
                session.add(job)
                self._changed(session, pending, job)
            return job, True
        except IntegrityError:
            # Lost a race with a concurrent create of the same job (PostgreSQL).
            with self.sessions() as session:
                existing = session.scalars(self._active_same(new)).first()
            if existing is None:
                raise
            return existing, False

    @staticmethod
    def _active_of_pr(repo: str, pr_number: int) -> Any:
        """This PR's queued and running jobs, oldest first."""
        return (
            select(Job)
            .where(Job.repo == repo, Job.pr_number == pr_number, Job.status.in_(ACTIVE_STATUSES))
            .order_by(Job.id)
        )

    @staticmethod
    def _active_same(new: NewJob) -> Any:
        return select(Job).where(
            Job.repo == new.repo,
            Job.pr_number == new.pr_number,
            Job.sha == new.sha,
            Job.op == new.op,
            Job.backend == new.backend,
            Job.status.in_(ACTIVE_STATUSES),
        )

    def get_job(self, job_id: int) -> Job | None:
        with self.sessions() as session:
            return session.get(Job, job_id)

    def claim(self, runner_id: int, backends: Sequence[str]) -> Job | None:
        """Atomically take the oldest queued job on one of `backends` for `runner_id`."""
        if not backends:
            return None
        now = utcnow()
        with self._tx() as (session, pending):
            runner = session.get(Runner, runner_id)
            if runner is None:
                return None
            runner.last_seen_at = now
            pick = (
                select(Job.id)
                .where(Job.status == JobStatus.queued, Job.backend.in_(list(backends)))
                .order_by(Job.id)
                .limit(1)
            )
            if self.postgres:
                pick = pick.with_for_update(skip_locked=True)
            job_id = session.execute(
                update(Job)
                .where(Job.id == pick.scalar_subquery(), Job.status == JobStatus.queued)
                .values(
                    status=JobStatus.running,
                    runner_id=runner_id,
                    runner_name=runner.name,
                    started_at=now,
                    lease_expires_at=now + timedelta(seconds=self.lease_seconds),
                    reason=None,
                )
                .returning(Job.id)
                .execution_options(synchronize_session=False)
            ).scalar()
            if job_id is None:
                return None
            job = session.get(Job, job_id, populate_existing=True)
            assert job is not None
            self._changed(session, pending, job)
            if self.listener is not None:
                behind = session.scalars(
                    select(Job)
                    .where(Job.status == JobStatus.queued, Job.backend == job.backend)
                    .order_by(Job.id)
                    .limit(QUEUE_REFRESH)
                ).all()
                if behind:
                    self.listener.queue_moved(session, behind)
        return job

    def release(self, runner_id: int, job_id: int) -> None:
        """Give back a job claimed for a runner that went away before receiving it."""
        with self._tx() as (session, pending):
            job = self._held(session, runner_id, job_id)
            if job is None or job.status != JobStatus.running:
                return
            job.status = JobStatus.queued
            job.runner_id = None
            job.runner_name = None
            job.started_at = None
            job.lease_expires_at = None
            self._changed(session, pending, job)

    def _held(self, session: Session, runner_id: int, job_id: int) -> Job | None:
        job = session.scalars(
            self._lock(select(Job).where(Job.id == job_id, Job.runner_id == runner_id))
        ).first()
        return job

    def heartbeat(self, runner_id: int, job_id: int) -> Heartbeat | None:
        """Renew the lease of a job `runner_id` holds; None when it does not hold it."""
        now = utcnow()
        with self._tx() as (session, _):
            job = self._held(session, runner_id, job_id)
            if job is None:
                return None
            runner = session.get(Runner, runner_id)
            if runner is not None:
                runner.last_seen_at = now
            if job.status != JobStatus.running:
                return Heartbeat(True, job.reason or f"job is {job.status}", now)
            job.lease_expires_at = now + timedelta(seconds=self.lease_seconds)
            return Heartbeat(job.cancel_requested, job.reason, job.lease_expires_at)

    def append_log(self, runner_id: int, job_id: int, offset: int, data: bytes) -> LogAppend | None:
        """Append `data` at byte `offset`; duplicates are no-ops, gaps are refused."""
        with self._tx() as (session, _):
            job = self._held(session, runner_id, job_id)
            if job is None:
                return None
            end = job.log_size
            if offset > end or offset < 0:
                return LogAppend(False, end)
            if offset + len(data) <= end:
                return LogAppend(True, end)
            if offset < end:
                overlap = end - offset
                if self._read_log(session, job_id, offset, overlap) != data[:overlap]:
                    return LogAppend(False, end)
                data = data[overlap:]
            session.add(LogChunk(job_id=job_id, offset=end, data=data))
            job.log_size = end + len(data)
            return LogAppend(True, job.log_size)

    @staticmethod
    def _read_log(session: Session, job_id: int, start: int, length: int) -> bytes:
        chunks = session.scalars(
            select(LogChunk)
            .where(LogChunk.job_id == job_id, LogChunk.offset < start + length)
            .order_by(LogChunk.offset)
        ).all()
        blob = b"".join(c.data for c in chunks)
        return blob[start : start + length]

    def read_log(self, job_id: int, start: int = 0, limit: int | None = None) -> bytes:
        with self.sessions() as session:
            query = select(LogChunk).where(LogChunk.job_id == job_id).order_by(LogChunk.offset)
            blob = b"".join(c.data for c in session.scalars(query))
        end = None if limit is None else start + limit
        return blob[start:end]

    def complete(self, runner_id: int, job_id: int, result: JobResult) -> JobStatus | None:
        """Record the result of a job `runner_id` holds; the same call again changes nothing."""
        if result.status not in RUNNER_REPORTABLE:
            raise ValueError(
                f"a runner may complete a job as {', '.join(sorted(RUNNER_REPORTABLE))}, "
                f"not {result.status}"
            )
        now = utcnow()
        with self._tx() as (session, pending):
            job = self._held(session, runner_id, job_id)
            if job is None:
                return None
            if job.status != JobStatus.running:
                return JobStatus(job.status)
            job.status = result.status
            job.result = result.model_dump(mode="json")
            job.finished_at = now
            job.lease_expires_at = None
            if result.status != JobStatus.cancelled and not job.cancel_requested:
                job.reason = None
            self._changed(session, pending, job)
            return JobStatus(job.status)

    def active_jobs(self, repo: str, pr_number: int) -> list[Job]:
        with self.sessions() as session:
            return list(session.scalars(self._active_of_pr(repo, pr_number)))

    def cancel(
        self,
        repo: str,
        pr_number: int,
        reason: str,
        *,
        match: Callable[[Job], bool] = lambda _job: True,
        queued_status: JobStatus = JobStatus.cancelled,
    ) -> list[Job]:
        """End this PR's queued jobs that `match` (as `queued_status`) and ask its running ones
        to stop; returns every job affected."""
        now = utcnow()
        affected: list[Job] = []
        with self._tx() as (session, pending):
            jobs = session.scalars(self._lock(self._active_of_pr(repo, pr_number))).all()
            for job in jobs:
                if not match(job):
                    continue
                if job.status == JobStatus.queued:
                    job.status = queued_status
                    job.finished_at = now
                elif job.cancel_requested:
                    continue
                else:
                    job.cancel_requested = True
                job.reason = reason
                affected.append(job)
                self._changed(session, pending, job)
        return affected

    def supersede(self, repo: str, pr_number: int, new_sha: str) -> list[Job]:
        """The PR moved to `new_sha`: its jobs for other SHAs are superseded (queued) or
        cancelled (running)."""
        return self.cancel(
            repo,
            pr_number,
            f"superseded by {new_sha[:7]}",
            match=lambda job: job.sha != new_sha,
            queued_status=JobStatus.superseded,
        )

    def reap(self, now: datetime | None = None) -> list[Job]:
        """Jobs whose lease lapsed: requeue once, then end as errored "runner lost"."""
        now = now or utcnow()
        changed: list[Job] = []
        with self._tx() as (session, pending):
            query = select(Job).where(Job.status == JobStatus.running, Job.lease_expires_at < now)
            if self.postgres:
                query = query.with_for_update(skip_locked=True)
            for job in session.scalars(query).all():
                lost = job.runner_name or f"runner {job.runner_id}"
                if job.cancel_requested:
                    job.status = JobStatus.cancelled
                    job.finished_at = now
                elif job.attempt < 2:
                    job.status = JobStatus.queued
                    job.attempt += 1
                    job.runner_id = None
                    job.runner_name = None
                    job.started_at = None
                    job.reason = f"{lost} lost; requeued"
                else:
                    job.status = JobStatus.errored
                    job.finished_at = now
                    job.reason = RUNNER_LOST
                job.lease_expires_at = None
                changed.append(job)
                self._changed(session, pending, job)
        return changed

    def next_lease_expiry(self) -> datetime | None:
        with self.sessions() as session:
            return session.scalar(
                select(func.min(Job.lease_expires_at)).where(Job.status == JobStatus.running)
            )

    def queue_position(self, session: Session, job: Job) -> int | None:
        if job.status != JobStatus.queued:
            return None
        return int(
            session.scalar(
                select(func.count(Job.id)).where(
                    Job.status == JobStatus.queued, Job.backend == job.backend, Job.id <= job.id
                )
            )
            or 0
        )

    def triple_jobs(self, session: Session, repo: str, pr: int, op: str, backend: str) -> list[Job]:
        """Every job of one (PR, op, backend), oldest first."""
        return list(
            session.scalars(
                select(Job)
                .where(Job.repo == repo, Job.pr_number == pr, Job.op == op, Job.backend == backend)
                .order_by(Job.id)
            )
        )

    def latest_per_target(self, repo: str, pr_number: int) -> list[Job]:
        """The last job of each (op, backend) this PR has run, in order of first request."""
        with self.sessions() as session:
            jobs = session.scalars(
                select(Job).where(Job.repo == repo, Job.pr_number == pr_number).order_by(Job.id)
            ).all()
        latest: dict[tuple[str, str], Job] = {}
        for job in jobs:
            latest[(job.op, job.backend)] = job
        return list(latest.values())

    def recent_jobs(self, limit: int = 50) -> list[Job]:
        with self.sessions() as session:
            return list(session.scalars(select(Job).order_by(Job.id.desc()).limit(limit)))

    # -- runners ------------------------------------------------------------------------

    def register_runner(
        self,
        name: str,
        backends: Sequence[str],
        labels: Sequence[str] = (),
        slots: int = 1,
        version: str | None = None,
    ) -> tuple[int, str]:
        """A new runner; returns its id and its bearer token (only the hash is kept)."""
        token = secrets.token_urlsafe(32)
        with self._tx() as (session, _):
            runner = Runner(
                name=name,
                token_hash=hash_token(token),
                backends=list(backends),
                labels=list(labels),
                slots=slots,
                version=version,
                healthy=True,
                created_at=utcnow(),
                last_seen_at=utcnow(),
            )
            session.add(runner)
            session.flush()
            return runner.id, token

    def authenticate(self, token: str) -> Runner | None:
        with self.sessions() as session:
            return session.scalars(
                select(Runner).where(Runner.token_hash == hash_token(token))
            ).first()

    def set_health(
        self, runner_id: int, healthy: bool, reason: str | None, backends: Sequence[str] | None
    ) -> None:
        with self._tx() as (session, _):
            runner = session.get(Runner, runner_id)
            if runner is None:
                return
            runner.healthy = healthy
            runner.health_reason = None if healthy else (reason or "unhealthy")
            if backends:
                runner.backends = list(backends)
            runner.last_seen_at = utcnow()

    def runners(self) -> list[Runner]:
        with self.sessions() as session:
            return list(session.scalars(select(Runner).order_by(Runner.id)))

    def online(self, runner: Runner, now: datetime | None = None) -> bool:
        now = now or utcnow()
        return runner.last_seen_at >= now - timedelta(seconds=self.runner_online_seconds)

    def runners_online(self, backend: str, runners: Sequence[Runner] | None = None) -> int:
        """Healthy runners serving `backend` seen recently."""
        runners = self.runners() if runners is None else runners
        return sum(1 for r in runners if r.healthy and backend in r.backends and self.online(r))

    def unhealthy_reasons(self, backend: str, runners: Sequence[Runner] | None = None) -> list[str]:
        runners = self.runners() if runners is None else runners
        return [
            f"{r.name}: {r.health_reason}"
            for r in runners
            if not r.healthy and backend in r.backends and self.online(r)
        ]
