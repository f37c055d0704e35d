"""Read-only questions about jobs, asked inside a caller's session: shared by the queue's
repositories, the views the report is rendered from, the pages and the metrics."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Select, func, or_, select
from sqlalchemy.orm import Session

from service.db.models import ACTIVE_STATUSES, Delivery, Job, OutboxItem
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


# -- the dashboard's and the metrics' questions ---------------------------------------------


def queued_jobs(session: Session) -> list[Job]:
    """Every queued job, by backend then age: each backend's queue in claim order."""
    query = select(Job).where(Job.status == JobStatus.queued).order_by(Job.backend, Job.id)
    return list(session.scalars(query))


def running_jobs(session: Session) -> list[Job]:
    """Every running job, oldest first."""
    query = select(Job).where(Job.status == JobStatus.running).order_by(Job.id)
    return list(session.scalars(query))


@dataclass(frozen=True)
class HistoryFilter:
    """The dashboard's job history filter; None (or empty) matches anything."""

    repo: str | None = None
    op: str | None = None
    backend: str | None = None
    state: str | None = None

    def where(self, query: Select[tuple[Job]]) -> Select[tuple[Job]]:
        for column, value in (
            (Job.repo, self.repo),
            (Job.op, self.op),
            (Job.backend, self.backend),
            (Job.status, self.state),
        ):
            if value:
                query = query.where(column == value)
        return query


def public_history(session: Session, wanted: HistoryFilter, limit: int) -> list[Job]:
    """The newest jobs of public repositories that match `wanted`, newest first."""
    query = wanted.where(select(Job).where(Job.private.is_(False)))
    return list(session.scalars(query.order_by(Job.id.desc()).limit(limit)))


def public_choices(session: Session) -> dict[str, list[str]]:
    """The repositories, operators and backends public jobs have: the filter's options."""
    columns = {"repo": Job.repo, "op": Job.op, "backend": Job.backend}
    return {
        name: list(
            session.scalars(
                select(column).where(Job.private.is_(False)).distinct().order_by(column)
            )
        )
        for name, column in columns.items()
    }


def public_benchmarked(session: Session, limit: int) -> list[Job]:
    """The newest finished jobs of public repositories that carry a result, oldest first:
    the speedup charts' points."""
    query = (
        select(Job)
        .where(
            Job.private.is_(False),
            Job.status.in_((JobStatus.succeeded, JobStatus.failed)),
            Job.result.is_not(None),
        )
        .order_by(Job.id.desc())
        .limit(limit)
    )
    return list(reversed(list(session.scalars(query))))


def queue_depths(session: Session) -> list[tuple[str, int, datetime | None]]:
    """Per backend with queued jobs: how many, and when the oldest was queued."""
    query = (
        select(Job.backend, func.count(Job.id), func.min(Job.created_at))
        .where(Job.status == JobStatus.queued)
        .group_by(Job.backend)
    )
    return [(backend, int(count), oldest) for backend, count, oldest in session.execute(query)]


def finished_durations(session: Session) -> list[tuple[str, str, float]]:
    """(backend, state, seconds from start to finish) of every job that ran and finished."""
    query = select(Job.backend, Job.status, Job.started_at, Job.finished_at).where(
        Job.started_at.is_not(None), Job.finished_at.is_not(None)
    )
    return [
        (backend, status, max((finished - started).total_seconds(), 0.0))
        for backend, status, started, finished in session.execute(query)
    ]


def job_counts(session: Session) -> dict[str, int]:
    """How many jobs are in each state."""
    query = select(Job.status, func.count(Job.id)).group_by(Job.status)
    return {status: int(count) for status, count in session.execute(query)}


def queue_waits(session: Session) -> list[tuple[str, float]]:
    """(backend, seconds from queued to started) of every job that started."""
    query = select(Job.backend, Job.created_at, Job.started_at).where(Job.started_at.is_not(None))
    return [
        (backend, max((started - created).total_seconds(), 0.0))
        for backend, created, started in session.execute(query)
    ]


def backlog(
    session: Session, model: type[Delivery] | type[OutboxItem]
) -> tuple[int, datetime | None]:
    """Rows of the inbox's or the outbox's table not yet done, and the oldest one's time."""
    stamp = Delivery.received_at if model is Delivery else OutboxItem.created_at
    count, oldest = session.execute(
        select(func.count(model.id), func.min(stamp)).where(model.done_at.is_(None))
    ).one()
    return int(count or 0), oldest


def delivery_outcomes(session: Session) -> dict[str, int]:
    """Deliveries by outcome: pending, parked (waiting for a permission), handled, given up."""
    gave_up = Delivery.outcome.like("gave up:%")
    open_ = Delivery.done_at.is_(None)
    query = select(
        func.count(Delivery.id).filter(open_, Delivery.waiting_for.is_(None)),
        func.count(Delivery.id).filter(open_, Delivery.waiting_for.is_not(None)),
        func.count(Delivery.id).filter(Delivery.done_at.is_not(None), gave_up),
        func.count(Delivery.id).filter(
            Delivery.done_at.is_not(None), or_(Delivery.outcome.is_(None), ~gave_up)
        ),
    )
    pending, parked_, failed, handled = session.execute(query).one()
    return {
        "pending": int(pending),
        "parked": int(parked_),
        "gave_up": int(failed),
        "handled": int(handled),
    }


def parked(session: Session) -> tuple[list[Delivery], list[OutboxItem]]:
    """The deliveries and outbox items waiting for a permission the App lacks, oldest first."""
    d, o = Delivery, OutboxItem
    deliveries = select(d).where(d.done_at.is_(None), d.waiting_for.is_not(None)).order_by(d.id)
    items = select(o).where(o.done_at.is_(None), o.waiting_for.is_not(None)).order_by(o.id)
    return list(session.scalars(deliveries)), list(session.scalars(items))


def jobs_by_id(session: Session, ids: Collection[int]) -> dict[int, Job]:
    """The jobs of `ids` still kept, by id."""
    if not ids:
        return {}
    return {j.id: j for j in session.scalars(select(Job).where(Job.id.in_(list(ids))))}


def private_repos(session: Session, names: Collection[str]) -> set[str]:
    """Which of the repositories `names` are private, as their jobs recorded."""
    if not names:
        return set()
    query = select(Job.repo).where(Job.repo.in_(list(names)), Job.private.is_(True)).distinct()
    return set(session.scalars(query))


ESTIMATE_RUNS = 20  # the past jobs an estimate is the median of


def usual_duration(session: Session, job: Job) -> float | None:
    """How long this operator's jobs of `job`'s repository take on its backend, in seconds:
    the median of the last finished runs with a verdict (None without any)."""
    query = (
        select(Job.started_at, Job.finished_at)
        .where(
            Job.repo == job.repo,
            Job.op == job.op,
            Job.backend == job.backend,
            Job.status.in_([JobStatus.succeeded, JobStatus.failed]),
            Job.started_at.is_not(None),
            Job.finished_at.is_not(None),
            Job.id != job.id,
        )
        .order_by(Job.id.desc())
        .limit(ESTIMATE_RUNS)
    )
    spans = sorted((end - start).total_seconds() for start, end in session.execute(query))
    return spans[len(spans) // 2] if spans else None
