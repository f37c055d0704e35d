"""How jobs end, other than by a lapsed lease: a runner's result or its own interrupt, a cancel
(and a supersede: the pull request moved on), and a regression someone accepted."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from service.db.engine import utcnow
from service.db.models import Job
from service.queue import queries
from service.queue.flaky import record_flaky
from service.queue.job_leases import unfinished
from service.queue.job_store import JobTransactions, job_channel
from service.queue.operators import record_operators
from workflows.models import JobResult, JobStatus

RUNNER_REPORTABLE = frozenset(
    {
        JobStatus.succeeded,
        JobStatus.failed,
        JobStatus.errored,
        JobStatus.cancelled,
        JobStatus.timed_out,
    }
)


class JobResults(JobTransactions):
    """A job's end as its runner reports it, and the cancels and acceptances people ask for."""

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
            unfinished(job, now, why, f"{why} on its last attempt")
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
