"""Retention: what is old enough to delete (`cutoffs`, a plain function), and the pruner that
deletes it, a bounded batch per transaction, on every replica.

A pass, every ten minutes: the logs of jobs finished before the log cutoff (the job, its
result and report stay, and its page says the log was pruned), then the jobs finished before
the job cutoff, then the handled deliveries and delivered outbox items done before theirs.
Never deleted: a queued or running job, the newest succeeded or failed job of each
(repository, operator, backend) (the dashboard's last speedup and the usual duration of its
jobs), a pending delivery or outbox item, the newest version of a pull request's note (it
says whether the note was ever written). Each transaction deletes at most `batch` rows of a
table, so no lock is held long and no transaction grows with the backlog; on PostgreSQL the
rows are taken `FOR UPDATE SKIP LOCKED`, so replicas pruning at once share the work, and a
row already gone is simply not found again."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from datetime import datetime, timedelta

from sqlalchemy import (
    ColumnElement,
    Integer,
    Select,
    any_,
    delete,
    exists,
    literal,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import InstrumentedAttribute, Session, aliased

from service.db.engine import Database, utcnow
from service.db.models import (
    ACTIVE_STATUSES,
    LOGGED_SQL,
    Delivery,
    Job,
    JobArtifact,
    LogChunk,
    OutboxItem,
)
from service.worker import Worker
from workflows.models import JobStatus

log = logging.getLogger(__name__)

PRUNE_EVERY_S = 600.0
FIRST_PASS_S = 60.0  # after start-up: the service settles (and takes up its backlog) first
BATCH = 500  # rows of one table a transaction deletes at most
VACUUM_PAGES = 2048  # SQLite pages an incremental vacuum gives back per transaction
VERDICTS = (JobStatus.succeeded.value, JobStatus.failed.value)


@dataclass(frozen=True)
class Retention:
    """Days each kind of row is kept once done; 0 keeps it forever."""

    job_days: float = 90.0
    log_days: float = 30.0
    delivery_days: float = 14.0


@dataclass(frozen=True)
class Cutoffs:
    """What finished (or was done) before these moments goes; None: nothing of that kind."""

    jobs: datetime | None
    logs: datetime | None
    done: datetime | None  # deliveries and outbox items


def cutoffs(retention: Retention, now: datetime) -> Cutoffs:
    """The moments before which rows are old under `retention` at `now`. A log never outlives
    its job: its cutoff is the later of the two (logs kept forever go with their job)."""

    def before(days: float) -> datetime | None:
        return now - timedelta(days=days) if days > 0 else None

    jobs, logs = before(retention.job_days), before(retention.log_days)
    if jobs is not None and (logs is None or logs < jobs):
        logs = jobs
    return Cutoffs(jobs=jobs, logs=logs, done=before(retention.delivery_days))


def emptied(candidates: Sequence[int], deleted_from: Sequence[int], full: bool) -> list[int]:
    """Of the `candidates` whose chunks a batch read in job order, the jobs whose logs it
    deleted whole: all of them when it read fewer than its limit (`full` False); else those
    before the last job it deleted from, whose log may go on."""
    if not full or not deleted_from:
        return sorted(candidates)
    last = max(deleted_from)
    return sorted(j for j in candidates if j < last)


@dataclass
class Pruned:
    """What a pass deleted: jobs, logs (whole), log chunks, deliveries, outbox items."""

    jobs: int = 0
    logs: int = 0
    chunks: int = 0
    deliveries: int = 0
    outbox: int = 0
    vacuumed_pages: int = 0

    def any(self) -> bool:
        return any(getattr(self, f.name) for f in fields(self))

    def add(self, other: Pruned) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


class Pruner(Worker):
    """Deletes what `retention` no longer keeps, every `every_s` seconds (the first pass
    `first_s` after start), resting between batches while the webhook is busy."""

    name = "pruner"

    def __init__(
        self,
        db: Database,
        retention: Retention,
        stopping: threading.Event,
        *,
        busy: Callable[[], bool] | None = None,
        batch: int = BATCH,
        every_s: float = PRUNE_EVERY_S,
        first_s: float = FIRST_PASS_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(stopping, db.outages, busy)
        self.db = db
        self.retention = retention
        self.batch = batch
        self.every_s = every_s
        self._clock = clock
        self._next = clock() + first_s
        self._lock = threading.Lock()
        self._totals = Pruned()  # since this process started, for /metrics

    def run_once(self) -> float:
        wait = self._next - self._clock()
        if wait > 0:
            return wait
        self._next = self._clock() + self.every_s  # a failed pass waits for the next one too
        self.prune()
        return self.every_s

    def prune(self, now: datetime | None = None) -> Pruned:
        """One pass at `now`; logs one line when it deleted something."""
        started = time.monotonic()
        cut = cutoffs(self.retention, now or utcnow())
        done = Pruned()
        steps = (  # logs first: a job goes once its log has
            (cut.logs, self._logs),
            (cut.jobs, self._jobs),
            (cut.done, self._deliveries),
            (cut.done, self._outbox),
        )
        for cutoff, step in steps:
            if cutoff is not None:
                self._repeat(step, cutoff, done)
        if done.any():
            done.vacuumed_pages = self._vacuum()
            log.info(
                "pruned %d jobs, %d logs (%d chunks), %d deliveries, %d outbox items in %.1f s%s",
                done.jobs,
                done.logs,
                done.chunks,
                done.deliveries,
                done.outbox,
                time.monotonic() - started,
                f"; SQLite gave back {done.vacuumed_pages} pages" if done.vacuumed_pages else "",
            )
            with self._lock:
                self._totals.add(done)
        return done

    def totals(self) -> Pruned:
        """What this process's passes have deleted since it started."""
        with self._lock:
            return Pruned(**{f.name: getattr(self._totals, f.name) for f in fields(Pruned)})

    def _repeat(
        self, step: Callable[[Session, datetime], Pruned], cutoff: datetime, into: Pruned
    ) -> None:
        """Run `step`, each time in its own write transaction, until it finds nothing more."""
        while not self.stopping.is_set():
            with self.paced(), self.db.writes() as session, session.begin():
                got = step(session, cutoff)
            into.add(got)
            if not got.any():
                return

    def _among(self, column: InstrumentedAttribute[int], ids: Sequence[int]) -> ColumnElement[bool]:
        """`column IN ids`; on PostgreSQL `= ANY` of one array parameter, not a placeholder an
        id: a batch's thousands of placeholders cost the driver more CPU to parse each
        statement than the server spends deleting the rows."""
        if self.db.postgres:
            return column == any_(literal(list(ids), ARRAY(Integer)))
        return column.in_(ids)

    def _ids(self, session: Session, query: Select[tuple[int]]) -> list[int]:
        """The ids `query` selects (on PostgreSQL locked, skipping rows another replica has)."""
        locked = self.db.for_update(query.limit(self.batch), skip_locked=True)
        return list(session.scalars(locked))

    # -- one transaction each ------------------------------------------------------------

    def _logs(self, session: Session, cutoff: datetime) -> Pruned:
        """Up to `batch` chunks of the oldest finished jobs' logs: their jobs are marked
        pruned (the pages say so from the first chunk gone); a job whose log is gone whole
        gets log_size 0, which takes it out of the partial index the candidates come from."""
        candidates = self._ids(session, logs_due(cutoff))
        if not candidates:
            return Pruned()
        rows = session.execute(
            select(LogChunk.id, LogChunk.job_id)
            .where(self._among(LogChunk.job_id, candidates))
            .order_by(LogChunk.job_id, LogChunk.offset)
            .limit(self.batch)
        ).all()
        chunk_ids = [chunk_id for chunk_id, _ in rows]
        touched = sorted({job_id for _, job_id in rows})
        whole = emptied(candidates, touched, full=len(rows) == self.batch)
        deleted = 0
        if chunk_ids:
            deleted = _rowcount(
                session.execute(delete(LogChunk).where(self._among(LogChunk.id, chunk_ids)))
            )
        session.execute(
            update(Job)
            .where(
                self._among(Job.id, sorted(set(touched) | set(whole))),
                Job.log_pruned_at.is_(None),
            )
            .values(log_pruned_at=utcnow())
            .execution_options(synchronize_session=False)
        )
        if whole:
            session.execute(
                update(Job)
                .where(self._among(Job.id, whole))
                .values(log_size=0)
                .execution_options(synchronize_session=False)
            )
        return Pruned(logs=len(whole), chunks=deleted)

    def _jobs(self, session: Session, cutoff: datetime) -> Pruned:
        """Up to `batch` jobs `jobs_due` with their artifacts (their logs are gone already,
        log_size 0; the foreign key would cascade to any chunk regardless)."""
        ids = self._ids(session, jobs_due(cutoff))
        if not ids:
            return Pruned()
        session.execute(delete(JobArtifact).where(self._among(JobArtifact.job_id, ids)))
        return Pruned(jobs=_rowcount(session.execute(delete(Job).where(self._among(Job.id, ids)))))

    def _deliveries(self, session: Session, cutoff: datetime) -> Pruned:
        return Pruned(deliveries=self._delete(session, Delivery, done_due(Delivery, cutoff)))

    def _outbox(self, session: Session, cutoff: datetime) -> Pruned:
        return Pruned(outbox=self._delete(session, OutboxItem, done_due(OutboxItem, cutoff)))

    def _delete(
        self,
        session: Session,
        model: type[Job] | type[Delivery] | type[OutboxItem],
        due: Select[tuple[int]],
    ) -> int:
        """Delete up to `batch` rows of `model` that `due` selects; how many went (a row
        another replica deleted first is not counted)."""
        ids = self._ids(session, due)
        if not ids:
            return 0
        return _rowcount(session.execute(delete(model).where(self._among(model.id, ids))))

    def _vacuum(self) -> int:
        """On a SQLite database made with `auto_vacuum=INCREMENTAL`, give the freed pages back
        to the file system, `VACUUM_PAGES` a transaction; returns how many. (Elsewhere freed
        pages are reused by later inserts.) Python's sqlite3 steps a statement without result
        columns once, and this pragma frees one page a step: so it runs once per page."""
        if self.db.postgres:
            return 0
        with self.db.reads() as session:
            if session.execute(text("PRAGMA auto_vacuum")).scalar() != 2:
                return 0
        given = 0
        while not self.stopping.is_set():
            with self.paced(), self.db.writes() as session, session.begin():
                free = int(session.execute(text("PRAGMA freelist_count")).scalar() or 0)
                pages = min(free, VACUUM_PAGES)
                for _ in range(pages):
                    session.execute(text("PRAGMA incremental_vacuum(1)"))
            given += pages
            if pages < VACUUM_PAGES:
                break
        return given


# -- what is due: the candidates' queries, oldest first (each served by an index) ---------


def logs_due(cutoff: datetime) -> Select[tuple[int]]:
    """Jobs finished before `cutoff` that still have a stored log (`ix_jobs_logged`)."""
    return (
        select(Job.id)
        .where(Job.finished_at < cutoff, text(LOGGED_SQL), Job.status.not_in(ACTIVE_STATUSES))
        .order_by(Job.finished_at)
    )


def jobs_due(cutoff: datetime) -> Select[tuple[int]]:
    """Jobs finished before `cutoff` whose logs are gone (`ix_jobs_finished`), but never the
    newest succeeded or failed job of its (repository, operator, backend) (`ix_jobs_target`
    finds a newer one)."""
    newer = aliased(Job)
    superseded = exists().where(
        newer.repo == Job.repo,
        newer.op == Job.op,
        newer.backend == Job.backend,
        newer.status.in_(VERDICTS),
        newer.id > Job.id,
    )
    return (
        select(Job.id)
        .where(
            Job.finished_at < cutoff,
            Job.status.not_in(ACTIVE_STATUSES),
            Job.log_size == 0,
            or_(Job.status.not_in(VERDICTS), superseded),
        )
        .order_by(Job.finished_at)
    )


def done_due(model: type[Delivery] | type[OutboxItem], cutoff: datetime) -> Select[tuple[int]]:
    """Deliveries or outbox items done before `cutoff` (by their `done_at` indexes); of a
    note's items, never the newest: whether a pull request's note was written is read from
    them."""
    query = select(model.id).where(model.done_at < cutoff)
    if model is OutboxItem:
        newer = aliased(OutboxItem)
        later_version = exists().where(newer.key == OutboxItem.key, newer.id > OutboxItem.id)
        query = query.where(or_(OutboxItem.kind != "note", later_version))
    return query.order_by(model.done_at)


def _rowcount(result: object) -> int:
    """Rows a DELETE removed."""
    return int(getattr(result, "rowcount", 0) or 0)
