"""The transaction every change of a job runs in (`JobTransactions`): it calls the
`JobListener` inside it (the report adds its outbox rows there: a transactional outbox) and,
after commit, wakes waiting claims and a held job's open channel (`job_channel`) and calls
`on_commit` (which kicks the outbox)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Protocol

from sqlalchemy import text
from sqlalchemy.orm import Session

from service.db.engine import Database
from service.db.models import Job
from service.queue import queries
from service.queue.wakeup import CHANNEL, Wakeup
from workflows.models import JobStatus

CLAIM_ACK_S = 10  # a runner beats at once when it starts a job


class JobListener(Protocol):
    def job_changed(self, session: Session, job: Job) -> None:
        """Called inside the transaction that changed `job` (after flush)."""

    def queue_moved(self, session: Session, jobs: Sequence[Job]) -> None:
        """Called when queued `jobs` moved up (a job ahead of them left the queue)."""

    def job_progressed(self, session: Session, job: Job) -> None:
        """Called when a running `job`'s progress changed (what to say may wait: it paces)."""


def job_channel(job_id: int) -> str:
    """The wake-up key of one job's open channel (woken on cancel, supersede and progress)."""
    return f"job:{job_id}"


@dataclass
class _Pending:
    backends: set[str] = field(default_factory=set)
    changed: bool = False


class JobTransactions:
    """The queue's database, wake-ups and listener, and the transaction its changes run in."""

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
