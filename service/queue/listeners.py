"""Several of the queue's listeners heard as one (`JobListener`), in order, inside the
transaction that changed the jobs: what to tell GitHub, and what the default branch's history
keeps."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.orm import Session

from service.db.models import Job
from service.queue.jobs import JobListener


class JobListeners:
    """Hands each change to every listener, in the order given."""

    def __init__(self, listeners: Sequence[JobListener]) -> None:
        self.listeners = tuple(listeners)

    def job_changed(self, session: Session, job: Job) -> None:
        for listener in self.listeners:
            listener.job_changed(session, job)

    def queue_moved(self, session: Session, jobs: Sequence[Job]) -> None:
        for listener in self.listeners:
            listener.queue_moved(session, jobs)

    def job_progressed(self, session: Session, job: Job) -> None:
        for listener in self.listeners:
            listener.job_progressed(session, job)
