"""Rows a worker takes, tries, and then finishes or retries: the inbox's deliveries and the
outbox's items. Taking a row is one conditional UPDATE, so several workers (threads, or
service replicas on one PostgreSQL database) never try the same row at once. The lock is
short and renewed while the try runs (`held`), so a slow try (GitHub taking its time) is never
taken twice, and the row of a worker that died comes back within `lock_s`, not minutes. The
round that takes, tries and finishes or retries them is written once, `service/worker.py`'s
`RowWorker`, which the inbox and the outbox both are."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Generic, TypeVar

from sqlalchemy import or_, select, update

from service.db.engine import Database, utcnow
from service.db.models import LeasedRow

log = logging.getLogger(__name__)
R = TypeVar("R", bound=LeasedRow)
MAX_TEXT = 4000
LOCK_S = 15.0


@dataclass(frozen=True, slots=True)
class Due:
    """A pending row as a worker's round sees it: `key` orders it (the outbox's key; the id
    where a table has none)."""

    id: int
    next_attempt_at: datetime
    locked_until: datetime | None
    key: str


class LeasedRows(Generic[R]):
    """The pending rows of one table, taken one at a time for `lock_s` seconds."""

    def __init__(self, db: Database, model: type[R], lock_s: float = LOCK_S) -> None:
        self.db = db
        self.model = model
        self.lock_s = lock_s

    def pending(self) -> list[Due]:
        """Every row not done yet, oldest first: what a round needs to choose the next one
        (its id, order key, retry time and lock), never its payload. A round reads this each
        time a delivery kicks it; while GitHub's budget is spent, hundreds of rows wait, and
        reading them whole took the backlog's size in memory each round, which the allocator
        kept (`take` reads the one row a try needs)."""
        m = self.model
        key = getattr(m, "key", None)  # outbox items go out in order per key
        with self.db.reads() as session:
            found = session.execute(
                select(m.id, m.next_attempt_at, m.locked_until, key if key is not None else m.id)
                .where(m.done_at.is_(None))
                .order_by(m.id)
            )
            return [Due(i, n, lock, str(k)) for i, n, lock, k in found]

    @staticmethod
    def due_at(row: Due | R) -> datetime:
        """When `row` may next be tried: its retry time, or after its current lock."""
        if row.locked_until is not None and row.locked_until > row.next_attempt_at:
            return row.locked_until
        return row.next_attempt_at

    def take(self, row_id: int) -> R | None:
        """Lock a due row and count the attempt; None when it is done, locked or not due."""
        now = utcnow()
        m = self.model
        with self.db.writes() as session, session.begin():
            taken = session.execute(
                update(m)
                .where(
                    m.id == row_id,
                    m.done_at.is_(None),
                    m.next_attempt_at <= now,
                    or_(m.locked_until.is_(None), m.locked_until < now),
                )
                .values(locked_until=now + timedelta(seconds=self.lock_s), attempts=m.attempts + 1)
                .execution_options(synchronize_session=False)
            ).rowcount
            return session.get(m, row_id) if taken == 1 else None

    @contextmanager
    def held(self, row_id: int) -> Iterator[None]:
        """Keep the lock on a row taken with `take` while the block runs: renewed every third
        of `lock_s` until the block ends (then `finish` or `retry` releases it)."""
        stop = threading.Event()

        def renew() -> None:
            while not stop.wait(self.lock_s / 3):
                try:
                    self._extend(row_id)
                except Exception as exc:  # the database is away: the try fails on its own
                    log.debug("row %s: lock not renewed: %s", row_id, exc)

        thread = threading.Thread(target=renew, name=f"lock-{row_id}", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()

    def release_all(self) -> int:
        """Unlock every pending row at once; for a service starting on SQLite, where only one
        process serves a database, so a row it finds locked was locked by its previous life
        (a crash) and would otherwise wait out the lock. Returns how many."""
        m = self.model
        with self.db.writes() as session, session.begin():
            return session.execute(
                update(m)
                .where(m.done_at.is_(None), m.locked_until.is_not(None))
                .values(locked_until=None)
                .execution_options(synchronize_session=False)
            ).rowcount

    def _extend(self, row_id: int) -> None:
        m = self.model
        with self.db.writes() as session, session.begin():
            session.execute(
                update(m)
                .where(m.id == row_id, m.done_at.is_(None), m.locked_until.is_not(None))
                .values(locked_until=utcnow() + timedelta(seconds=self.lock_s))
                .execution_options(synchronize_session=False)
            )

    def finish(self, row_id: int, outcome: str) -> None:
        """The row is done with `outcome`; it is never tried again."""
        with self.db.writes() as session, session.begin():
            row = session.get(self.model, row_id)
            if row is not None:
                row.done_at = utcnow()
                row.locked_until = None
                row.outcome = outcome[:MAX_TEXT]
                row.last_error = None
                row.waiting_for = None

    def retry(self, row_id: int, wait_s: float, error: str) -> None:
        """Try the row again in `wait_s` seconds; `error` says why this try failed."""
        self._again(row_id, wait_s, error, None)

    def park(self, row_id: int, waiting_for: str, wait_s: float, error: str) -> None:
        """Try the row again in `wait_s` seconds, or as soon as `release` says what it waits
        for (`waiting_for`, a permission: `contents:read`) may have come."""
        self._again(row_id, wait_s, error, waiting_for[:100])

    def _again(self, row_id: int, wait_s: float, error: str, waiting_for: str | None) -> None:
        with self.db.writes() as session, session.begin():
            row = session.get(self.model, row_id)
            if row is not None:
                row.locked_until = None
                row.next_attempt_at = utcnow() + timedelta(seconds=wait_s)
                row.last_error = error[:MAX_TEXT]
                row.waiting_for = waiting_for

    def parked(self) -> list[R]:
        """Every row waiting for a permission, oldest first (detached snapshots)."""
        with self.db.reads() as session:
            m = self.model
            query = select(m).where(m.done_at.is_(None), m.waiting_for.is_not(None))
            return list(session.scalars(query.order_by(m.id)))

    def release(self, row_ids: list[int]) -> int:
        """Make these parked rows due now (what they wait for may have come); how many."""
        if not row_ids:
            return 0
        m = self.model
        with self.db.writes() as session, session.begin():
            return session.execute(
                update(m)
                .where(m.id.in_(row_ids), m.done_at.is_(None), m.waiting_for.is_not(None))
                .values(next_attempt_at=utcnow())
                .execution_options(synchronize_session=False)
            ).rowcount

    def give_up(self, row_id: int, error: str) -> None:
        """The row is done without success; `error` is kept as its outcome."""
        with self.db.writes() as session, session.begin():
            row = session.get(self.model, row_id)
            if row is not None:
                row.done_at = utcnow()
                row.locked_until = None
                row.last_error = error[:MAX_TEXT]
                row.outcome = f"gave up: {error}"[:MAX_TEXT]
                row.waiting_for = None
