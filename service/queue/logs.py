"""Job logs, stored as chunks at byte offsets: appended by the runner that holds the job (a
chunk sent twice is a no-op, a gap is refused with the right offset, nothing past the cap is
stored), read by the pages a few chunks at a time, so a large log never sits in memory."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ondemand.utf8 import whole_characters
from service.db.engine import Database
from service.db.models import Job, LogChunk
from service.queue import queries

DEFAULT_MAX_BYTES = 16 * 1024 * 1024
_CHUNKS_PER_READ = 2  # a read holds at most this many chunks (each at most 1 MiB)


@dataclass(frozen=True)
class LogAppend:
    accepted: bool  # False: a gap, a disagreeing overlap, or past the cap; `offset` is the end
    offset: int
    full: bool = False  # refused because the log would pass the cap


class JobLogs:
    def __init__(self, db: Database, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.db = db
        self.max_bytes = max_bytes

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
            full = end + len(data) > self.max_bytes
            if full:  # keep what fits, up to a whole character
                data = whole_characters(data[: max(self.max_bytes - end, 0)])
            if data:
                session.add(LogChunk(job_id=job_id, offset=end, data=data))
                job.log_size = end + len(data)
            return LogAppend(not full, job.log_size, full=full)

    def size(self, job_id: int) -> int:
        """The log's length in bytes (0 for a job without one)."""
        with self.db.reads() as session:
            return session.scalar(select(Job.log_size).where(Job.id == job_id)) or 0

    def read(self, job_id: int, start: int = 0, limit: int | None = None) -> bytes:
        """Bytes `start` to `start + limit` (to the end without a limit), at once: for small
        ranges; pages use `stream`."""
        with self.db.reads() as session:
            return _read(session, job_id, start, limit)

    def stream(self, job_id: int, start: int = 0, end: int | None = None) -> Iterator[bytes]:
        """Bytes `start` to `end` (to the end of the log without one), a few chunks per read,
        each read in its own short session: constant memory, no transaction held open while
        a slow client takes its time."""
        position = start
        while end is None or position < end:
            with self.db.reads() as session:
                first = _first_chunk(session, job_id, position)
                query = (
                    select(LogChunk.offset, LogChunk.data)
                    .where(LogChunk.job_id == job_id, LogChunk.offset >= first)
                    .order_by(LogChunk.offset)
                    .limit(_CHUNKS_PER_READ)
                )
                chunks = [(int(offset), bytes(data)) for offset, data in session.execute(query)]
            if not chunks:
                return
            for offset, data in chunks:
                lo = max(position - offset, 0)
                hi = len(data) if end is None else min(len(data), end - offset)
                if hi > lo:
                    yield data[lo:hi]
                position = max(position, offset + len(data))
                if end is not None and position >= end:
                    return


def _first_chunk(session: Session, job_id: int, position: int) -> int:
    """The offset of the chunk that holds byte `position` (0 when none starts before it)."""
    found = session.scalar(
        select(func.max(LogChunk.offset)).where(
            LogChunk.job_id == job_id, LogChunk.offset <= position
        )
    )
    return int(found or 0)


def _read(session: Session, job_id: int, start: int, length: int | None) -> bytes:
    first = _first_chunk(session, job_id, start)
    query = (
        select(LogChunk)
        .where(LogChunk.job_id == job_id, LogChunk.offset >= first)
        .order_by(LogChunk.offset)
    )
    if length is not None:
        query = query.where(LogChunk.offset < start + length)
    chunks = list(session.scalars(query))
    if not chunks:
        return b""
    blob = b"".join(c.data for c in chunks)
    lo = start - chunks[0].offset
    return blob[lo:] if length is None else blob[lo : lo + length]
