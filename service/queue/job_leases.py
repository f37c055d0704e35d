"""Claiming and leases: a runner takes the oldest queued job of its backends, gives back one it
did not start, renews its lease by heartbeats, hears whether to stop, reports its progress; a
lapsed lease is reaped. SQLite claims with one `UPDATE … RETURNING`; PostgreSQL adds
`FOR UPDATE SKIP LOCKED`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import select, update

from service.db.engine import utcnow
from service.db.models import Job, Runner
from service.queue import queries
from service.queue.job_store import JobTransactions
from workflows.models import JobStatus, Progress

RUNNER_LOST = "runner lost"
MAX_ATTEMPTS = 2  # a job whose runner is lost or stopped runs once more, on any runner
QUEUE_REFRESH = 10  # queued jobs whose comments show their new position after a claim


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


class JobLeases(JobTransactions):
    """A job from its claim to its runner's last heartbeat, and the reaping of lapsed leases."""

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
            back_to_queue(job)
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
                    back_to_queue(job, f"{lost} took it but never started it; requeued")
                else:
                    unfinished(job, now, f"{lost} lost", RUNNER_LOST)
                changed.append(job)
                self._changed(session, pending, job)
        return changed


def back_to_queue(job: Job, reason: str | None = None) -> None:
    """The job waits for a runner again, held by none (its reason kept unless given)."""
    job.status = JobStatus.queued
    job.runner_id = None
    job.runner_name = None
    job.started_at = None
    job.lease_expires_at = None
    if reason is not None:
        job.reason = reason


def unfinished(job: Job, now: datetime, why: str, final: str) -> None:
    """A started job its runner could not finish (lost, or stopped by its host): cancelled
    where someone asked for that; else back to the queue for its next attempt (`why`;
    requeued), or, after the last, errored with `final`."""
    if job.cancel_requested:
        job.status = JobStatus.cancelled
        job.finished_at = now
    elif job.attempt < MAX_ATTEMPTS:
        job.attempt += 1
        back_to_queue(job, f"{why}; requeued")
    else:
        job.status = JobStatus.errored
        job.finished_at = now
        job.reason = final
    job.lease_expires_at = None
