"""A job's artifacts: files its runner uploads while it holds the job (a profile's traces,
gzip), stored in the database beside the job, so every replica serves them and the pruner
takes them with the job. Names are flat and plain; sizes are capped per file and per job."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from sqlalchemy import func, select

from service.db.engine import Database
from service.db.models import JobArtifact
from service.queue import queries
from workflows.models import JobStatus

MAX_ARTIFACT_BYTES = 8 * 1024 * 1024  # one file, gzip
MAX_JOB_ARTIFACT_BYTES = 32 * 1024 * 1024  # all of one job's
MAX_ARTIFACTS = 16
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
GZIP_MAGIC = b"\x1f\x8b"


class Stored(StrEnum):
    """What became of an upload."""

    stored = "stored"
    not_held = "not_held"  # the runner does not hold the job (or there is none)
    too_large = "too_large"  # past the file's or the job's cap, or one file too many


def valid_name(name: str) -> bool:
    """A flat name of letters, digits and `._-`, not starting with a dot (no path, no `..`)."""
    return NAME.fullmatch(name) is not None and ".." not in name


@dataclass(frozen=True)
class Artifact:
    name: str
    size: int


class JobArtifacts:
    def __init__(self, db: Database) -> None:
        self.db = db

    def put(self, runner_id: int, job_id: int, name: str, data: bytes) -> Stored:
        """Store `data` as the job's artifact `name` (replacing one of that name), while
        `runner_id` holds the job and it runs (a finished job takes nothing more); within
        the caps."""
        if len(data) > MAX_ARTIFACT_BYTES:
            return Stored.too_large
        with self.db.writes() as session, session.begin():
            job = session.scalars(self.db.for_update(queries.held(runner_id, job_id))).first()
            if job is None or job.status != JobStatus.running:
                return Stored.not_held
            others = session.execute(
                select(func.count(), func.coalesce(func.sum(JobArtifact.size), 0)).where(
                    JobArtifact.job_id == job_id, JobArtifact.name != name
                )
            ).one()
            if others[0] >= MAX_ARTIFACTS or others[1] + len(data) > MAX_JOB_ARTIFACT_BYTES:
                return Stored.too_large
            old = session.scalars(
                select(JobArtifact).where(JobArtifact.job_id == job_id, JobArtifact.name == name)
            ).first()
            if old is None:
                session.add(JobArtifact(job_id=job_id, name=name, data=data, size=len(data)))
            else:
                old.data, old.size = data, len(data)
            return Stored.stored

    def list(self, job_id: int) -> list[Artifact]:
        """The job's artifacts by name."""
        with self.db.reads() as session:
            rows = session.execute(
                select(JobArtifact.name, JobArtifact.size)
                .where(JobArtifact.job_id == job_id)
                .order_by(JobArtifact.name)
            ).all()
        return [Artifact(name, size) for name, size in rows]

    def read(self, job_id: int, name: str) -> bytes | None:
        with self.db.reads() as session:
            return session.scalar(
                select(JobArtifact.data).where(
                    JobArtifact.job_id == job_id, JobArtifact.name == name
                )
            )
