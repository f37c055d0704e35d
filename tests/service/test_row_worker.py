"""The round over due leased rows, written once for the inbox and the outbox (`RowWorker`): each
due row is taken and tried once, in order; a success finishes it with its outcome, a failure is
the worker's to judge (here: retried by the retry policy); a row not yet due is left for later
and its wait is the round's answer; a database outage ends the round without judging the row."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta

import pytest
import sqlalchemy.exc

from ondemand.retry import RetryPolicy
from service.db.engine import Database, utcnow
from service.db.leases import LeasedRows
from service.db.migrate import upgrade
from service.db.models import OutboxItem
from service.worker import RowWorker

POLICY = RetryPolicy(base_s=30.0, cap_s=300.0, jitter=False)


class Items(RowWorker[OutboxItem]):
    """Tries an item by its payload: `fail` raises, `outage` raises the database's error."""

    name = "items"

    def __init__(self, db: Database, stopping: threading.Event) -> None:
        super().__init__(LeasedRows(db, OutboxItem), POLICY, stopping)
        self.tried: list[str] = []
        self.judged: list[str] = []

    def attempt(self, row: OutboxItem) -> str:
        self.tried.append(row.key)
        if row.payload.get("outage"):
            raise sqlalchemy.exc.OperationalError("SELECT 1", {}, Exception("gone"))
        if row.payload.get("fail"):
            raise RuntimeError(f"{row.key} failed")
        return f"sent {row.key}"

    def failed(self, row: OutboxItem, error: Exception) -> float | None:
        self.judged.append(str(error))
        return self.retry(row, None, str(error))


@pytest.fixture
def db(db_url: str) -> Iterator[Database]:
    database = Database.connect(db_url)
    upgrade(database.engine)  # SQLite's copy is at the head already: nothing to do there
    yield database
    database.dispose()


def _add(db: Database, key: str, later_s: float = 0.0, **payload: object) -> int:
    with db.writes() as session, session.begin():
        item = OutboxItem(
            kind="reply",
            key=key,
            payload=dict(payload),
            next_attempt_at=utcnow() + timedelta(seconds=later_s),
        )
        session.add(item)
        session.flush()
        return item.id


def _row(db: Database, row_id: int) -> OutboxItem:
    with db.reads() as session:
        row = session.get(OutboxItem, row_id)
        assert row is not None
        return row


def test_a_round_tries_each_due_row_once_finishes_or_retries_it_and_says_when(
    db: Database,
) -> None:
    ok = _add(db, "a")
    bad = _add(db, "b", fail=True)
    later = _add(db, "c", later_s=600)
    worker = Items(db, threading.Event())
    wait = worker.run_once()
    assert worker.tried == ["a", "b"]  # in order; the one not due is left alone
    assert worker.judged == ["b failed"]
    done = _row(db, ok)
    assert done.done_at is not None and done.outcome == "sent a" and done.attempts == 1
    retried = _row(db, bad)
    assert retried.done_at is None and retried.last_error == "b failed"
    assert retried.locked_until is None  # released for its retry
    # the policy's wait after a first failure: its base, no jitter
    due_in = (retried.next_attempt_at - utcnow()).total_seconds()
    assert 25 < due_in <= 30
    assert wait is not None and 25 < wait <= 30  # the sooner of the retry and the later row
    assert _row(db, later).attempts == 0
    assert worker.run_once() is not None and worker.tried == ["a", "b"]  # nothing due now


def test_a_database_outage_ends_the_round_and_judges_no_row(db: Database) -> None:
    first = _add(db, "a", outage=True)
    _add(db, "b")
    worker = Items(db, threading.Event())
    with pytest.raises(sqlalchemy.exc.OperationalError):
        worker.run_once()
    assert worker.tried == ["a"] and worker.judged == []
    row = _row(db, first)
    assert row.done_at is None and row.last_error is None


def test_a_stopping_worker_tries_nothing(db: Database) -> None:
    _add(db, "a")
    stopping = threading.Event()
    stopping.set()
    worker = Items(db, stopping)
    assert worker.run_once() is None and worker.tried == []


class InOrder(Items):
    """Due: the first pending item of each key only, as the outbox's are."""

    def due(self) -> list[OutboxItem]:
        heads: dict[str, OutboxItem] = {}
        for item in self.rows.pending():
            heads.setdefault(item.key, item)
        return list(heads.values())


def test_a_row_held_back_behind_one_finished_goes_out_in_the_same_round(db: Database) -> None:
    """A key's second item, not due while its first was pending, is tried as soon as the
    first is finished: the round does not end on a wait for a kick that never comes."""
    first, second = _add(db, "a"), _add(db, "a")
    worker = InOrder(db, threading.Event())
    assert worker.run_once() is None  # nothing left pending
    assert worker.tried == ["a", "a"]
    assert _row(db, first).done_at is not None and _row(db, second).done_at is not None
    assert _row(db, first).done_at <= _row(db, second).done_at
