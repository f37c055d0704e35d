"""Job logs, stored as chunks at byte offsets: appended by the runner that holds the job (a
chunk sent twice is a no-op, a gap is refused with the right offset), read by the pages."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.db.engine import Database
from service.db.models import LogChunk
from service.queue import queries


@dataclass(frozen=True)
class LogAppend:
    accepted: bool  # False: a gap or a disagreeing overlap; `offset` is the right one
    offset: int


class JobLogs:
    def __init__(self, db: Database) -> None:
        self.db = db

    def append(self, runner_id: int, job_id: int, offset: int, data: bytes) -> LogAppend | None:
        """Append `data` at byte `offset`; None when `runner_id` does not hold the job."""
        with self.db.writes() as session, session.begin():
            job = session.scalars(self.db.for_update(queries.held(runner_id, job_id))).first()
            if job is None:
                return None
            end = job.log_size
            if offset > end or offset < 0:
                return LogAppend(False, end)
            if offset + len(data) <= end:
                return LogAppend(True, end)
            if offset < end:
                overlap = end - offset
                if _read(session, job_id, offset, overlap) != data[:overlap]:
                    return LogAppend(False, end)
                data = data[overlap:]
            session.add(LogChunk(job_id=job_id, offset=end, data=data))
            job.log_size = end + len(data)
            return LogAppend(True, job.log_size)

    def read(self, job_id: int, start: int = 0, limit: int | None = None) -> bytes:
        with self.db.reads() as session:
            return _read(session, job_id, start, limit)


def _read(session: Session, job_id: int, start: int, length: int | None) -> bytes:
    query = select(LogChunk).where(LogChunk.job_id == job_id).order_by(LogChunk.offset)
    if length is not None:
        query = query.where(LogChunk.offset < start + length)
    blob = b"".join(c.data for c in session.scalars(query))
    end = None if length is None else start + length
    return blob[start:end]
