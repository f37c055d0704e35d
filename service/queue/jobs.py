"""The jobs: create (deduplicated), claim, lease, complete, cancel, supersede, reap.

Every change happens in one transaction that also calls the `JobListener` (the report adds
its outbox rows there: a transactional outbox) and, after commit, wakes waiting claims and
calls `on_commit` (which kicks the outbox). SQLite claims with one `UPDATE … RETURNING`;
PostgreSQL adds `FOR UPDATE SKIP LOCKED`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

from sqlalchemy import Select, func, select, text, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from service.db.engine import Database, utcnow
from service.db.models import ACTIVE_STATUSES, Job, Runner
from service.queue import queries
from service.queue.flaky import record_flaky
from service.queue.operators import record_operators
from service.queue.wakeup import CHANNEL, Wakeup
from workflows.models import JobOptions, JobResult, JobSpec, JobStatus, Progress

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
MAX_ATTEMPTS = 2  # a job whose runner is lost or stopped runs once more, on any runner
CLAIM_ACK_S = 10  # a runner beats at once when it starts a job
QUEUE_REFRESH = 10  # queued jobs whose comments show their new position after a claim


class JobListener(Protocol):
    def job_changed(self, session: Session, job: Job) -> None:
        """Called inside the transaction that changed `job` (after flush)."""

    def queue_moved(self, session: Session, jobs: Sequence[Job]) -> None:
        """Called when queued `jobs` moved up (a job ahead of them left the queue)."""

    def job_progressed(self, session: Session, job: Job) -> None:
        """Called when a running `job`'s progress changed (what to say may wait: it paces)."""


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
    base_ref: str | None = None
    base_sha: str | None = None
    requested_by: str | None = None
    command_comment_id: int | None = None
    private: bool = False
    threshold: float = 0.1
    gate: str = "inform"
    trigger: str = "pull_request"  # or the default branch's own: push, nightly
    main_run_id: int | None = None


@dataclass(frozen=True)
class Heartbeat:
    cancel: bool
    reason: str | None
    lease_expires_at: datetime


@dataclass(frozen=True)
class CancelState:
    """What a runner's open channel answers: whether to stop the job now, and why."""

    cancel: bool
    reason: str | None


def job_channel(job_id: int) -> str:
    """The wake-up key of one job's open channel (woken on cancel, supersede and progress)."""
    return f"job:{job_id}"


@dataclass
class _Pending:
    backends: set[str] = field(default_factory=set)
    changed: bool = False


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
        options=JobOptions(bench=job.bench, compare=job.compare, exact_base=job.exact_base),
        lease_seconds=lease_seconds,
        attempt=job.attempt,
        git_token=git_token,
    )


class JobQueue:
    """Every job state change; safe to call from many threads and processes."""

    def __init__(
        self,
        db: Database,
        wakeup: Wakeup,
        *,
        lease_seconds: int = 120,
        listener: JobListener | None = None,
        on_commit: Callable[[], None] | None = None,
    ) -> None:
        self.db = db
        self.wakeup = wakeup
        self.lease_seconds = lease_seconds
        # A claimed job's first lease, until the runner's first heartbeat acknowledges it.
        self.ack_seconds = min(lease_seconds, CLAIM_ACK_S)
        self.listener = listener
        self.on_commit = on_commit

    # -- transactions -------------------------------------------------------------------

    @contextmanager
    def _tx(self) -> Iterator[tuple[Session, _Pending]]:
        pending = _Pending()
        with self.db.writes() as session, session.begin():
            yield session, pending
            for backend in pending.backends:
                if self.db.postgres:
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

    def _held(self, session: Session, runner_id: int, job_id: int) -> Job | None:
        return session.scalars(self.db.for_update(queries.held(runner_id, job_id))).first()

    # -- jobs ---------------------------------------------------------------------------

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

    def claim(
        self, runner_id: int, backends: Sequence[str], skip: Sequence[int] = ()
    ) -> Job | None:
        """Atomically take the oldest queued job on one of `backends` for `runner_id`, but
        none of `skip` (jobs it handed back because it could not run them)."""
        if not backends:
            return None
        now = utcnow()
        with self._tx() as (session, pending):
            runner = session.get(Runner, runner_id)
            if runner is None:
                return None
            runner.last_seen_at = now
            pick = select(Job.id).where(
                Job.status == JobStatus.queued, Job.backend.in_(list(backends))
            )
            if skip:
                pick = pick.where(Job.id.not_in(list(skip)))
            pick = pick.order_by(Job.id).limit(1)
            pick = self.db.for_update(pick, skip_locked=True)
            job_id = session.execute(
                update(Job)
                .where(Job.id == pick.scalar_subquery(), Job.status == JobStatus.queued)
                .values(
                    status=JobStatus.running,
                    runner_id=runner_id,
                    runner_name=runner.name,
                    started_at=now,
                    acked_at=None,
                    lease_expires_at=now + timedelta(seconds=self.ack_seconds),
                    reason=None,
                    progress=None,  # an earlier attempt's progress says nothing of this one
                    progress_noticed_at=None,
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

    def release(self, runner_id: int, job_id: int) -> bool:
        """Give back a job claimed for `runner_id` that it has not started (no heartbeat yet):
        a runner that went away before receiving it, or one stopping. False when it is not
        such a claim."""
        with self._tx() as (session, pending):
            job = self._held(session, runner_id, job_id)
            if job is None or job.status != JobStatus.running or job.acked_at is not None:
                return False
            _back_to_queue(job)
            self._changed(session, pending, job)
            return True

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
            job.acked_at = job.acked_at or now
            job.lease_expires_at = now + timedelta(seconds=self.lease_seconds)
            return Heartbeat(job.cancel_requested, job.reason, job.lease_expires_at)

    def cancel_state(self, runner_id: int, job_id: int) -> CancelState | None:
        """Whether the job `runner_id` holds should stop (read only: the lease is the
        heartbeat's); None when it does not hold it."""
        with self.db.reads() as session:
            job = session.scalars(queries.held(runner_id, job_id)).first()
            if job is None:
                return None
            if job.status != JobStatus.running:
                return CancelState(True, job.reason or f"job is {job.status}")
            return CancelState(job.cancel_requested, job.reason if job.cancel_requested else None)

    def progress(self, runner_id: int, job_id: int, progress: Progress) -> bool | None:
        """Keep the latest progress of a running job `runner_id` holds; True when it changed
        (then the listener hears of it), None when the runner does not hold the job."""
        data = progress.model_dump(mode="json")
        with self._tx() as (session, pending):
            job = self._held(session, runner_id, job_id)
            if job is None:
                return None
            if job.status != JobStatus.running or job.progress == data:
                return False
            job.progress = data
            session.flush()
            pending.changed = True
            if self.listener is not None:
                self.listener.job_progressed(session, job)
            return True

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
            if result.operators:
                record_operators(session, job.repo, job.sha, result.operators)
            record_flaky(session, job, result)
            job.finished_at = now
            job.lease_expires_at = None
            pending.backends.add(job_channel(job.id))  # the runner's open channel can close
            if result.status != JobStatus.cancelled and not job.cancel_requested:
                job.reason = None
            elif result.status == JobStatus.cancelled and not job.reason:
                job.reason = result.error_message  # the runner's own, where it gave one
            self._changed(session, pending, job)
            return JobStatus(job.status)

    def interrupt(self, runner_id: int, job_id: int, reason: str) -> JobStatus | None:
        """A job `runner_id` started and stopped for its own reasons (its daemon was told to
        stop): not the pull request's fault, so it is requeued for another attempt on any
        runner, as a lost runner's is, and ends errored only after the last. A job someone
        cancelled meanwhile stays cancelled. None when the runner does not hold it."""
        now = utcnow()
        with self._tx() as (session, pending):
            job = self._held(session, runner_id, job_id)
            if job is None:
                return None
            if job.status != JobStatus.running:
                return JobStatus(job.status)
            why = f"{job.runner_name or f'runner {job.runner_id}'} {reason}"  # "runner-a stopped…"
            _unfinished(job, now, why, f"{why} on its last attempt")
            pending.backends.add(job_channel(job.id))
            self._changed(session, pending, job)
            return JobStatus(job.status)

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
            jobs = session.scalars(self.db.for_update(queries.active_of_pr(repo, pr_number))).all()
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
                    pending.backends.add(job_channel(job.id))  # its runner hears it at once
                job.reason = reason
                affected.append(job)
                self._changed(session, pending, job)
        return affected

    def accept_regression(self, job_ids: Sequence[int], login: str) -> list[Job]:
        """Record that `login` accepted the regression of these finished jobs (their gate then
        passes); the listener hears of each, so its comment and status say so."""
        now = utcnow()
        accepted: list[Job] = []
        with self._tx() as (session, pending):
            for job_id in job_ids:
                job = session.get(Job, job_id)
                if job is None or job.accepted_by:
                    continue
                job.accepted_by, job.accepted_at = login, now
                accepted.append(job)
                self._changed(session, pending, job)
        return accepted

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
        """Jobs whose lease lapsed: a claim no runner acknowledged goes back to the queue as it
        was; a job a runner started is requeued once, then ends errored "runner lost"."""
        now = now or utcnow()
        changed: list[Job] = []
        with self._tx() as (session, pending):
            query = select(Job).where(Job.status == JobStatus.running, Job.lease_expires_at < now)
            query = self.db.for_update(query, skip_locked=True)
            for job in session.scalars(query).all():
                lost = job.runner_name or f"runner {job.runner_id}"
                if job.acked_at is None and not job.cancel_requested:
                    # The claim's answer reached no live runner (one that died waiting for
                    # it): the job never started, so this was no attempt.
                    _back_to_queue(job, f"{lost} took it but never started it; requeued")
                else:
                    _unfinished(job, now, f"{lost} lost", RUNNER_LOST)
                changed.append(job)
                self._changed(session, pending, job)
        return changed

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


def _back_to_queue(job: Job, reason: str | None = None) -> None:
    """The job waits for a runner again, held by none (its reason kept unless given)."""
    job.status = JobStatus.queued
    job.runner_id = None
    job.runner_name = None
    job.started_at = None
    job.lease_expires_at = None
    if reason is not None:
        job.reason = reason


def _unfinished(job: Job, now: datetime, why: str, final: str) -> None:
    """A started job its runner could not finish (lost, or stopped by its host): cancelled
    where someone asked for that; else back to the queue for its next attempt (`why`;
    requeued), or, after the last, errored with `final`."""
    if job.cancel_requested:
        job.status = JobStatus.cancelled
        job.finished_at = now
    elif job.attempt < MAX_ATTEMPTS:
        job.attempt += 1
        _back_to_queue(job, f"{why}; requeued")
    else:
        job.status = JobStatus.errored
        job.finished_at = now
        job.reason = final
    job.lease_expires_at = None
