"""Read-only questions about jobs, asked inside a caller's session: shared by the queue's
repositories and by the views the report is rendered from."""

from __future__ import annotations

from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session

from service.db.models import ACTIVE_STATUSES, Job
from workflows.models import JobStatus


def held(runner_id: int, job_id: int) -> Select[tuple[Job]]:
    """The job `job_id` when `runner_id` holds it."""
    return select(Job).where(Job.id == job_id, Job.runner_id == runner_id)


def active_of_pr(repo: str, pr_number: int) -> Select[tuple[Job]]:
    """This PR's queued and running jobs, oldest first."""
    return (
        select(Job)
        .where(Job.repo == repo, Job.pr_number == pr_number, Job.status.in_(ACTIVE_STATUSES))
        .order_by(Job.id)
    )


def queue_position(session: Session, job: Job) -> int | None:
    """1-based place of a queued job among the queued jobs of its backend; None otherwise."""
    if job.status != JobStatus.queued:
        return None
    ahead = select(func.count(Job.id)).where(
        Job.status == JobStatus.queued, Job.backend == job.backend, Job.id <= job.id
    )
    return int(session.scalar(ahead) or 0)


def target_jobs(session: Session, repo: str, pr: int, op: str, backend: str) -> list[Job]:
    """Every job of one (PR, op, backend), oldest first: one result comment shows them all."""
    query = (
        select(Job)
        .where(Job.repo == repo, Job.pr_number == pr, Job.op == op, Job.backend == backend)
        .order_by(Job.id)
    )
    return list(session.scalars(query))
