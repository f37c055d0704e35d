"""The durable inbox's writer: deliveries are stored in batches by one thread, one transaction
per batch (a group commit). Under a burst, a request waits for the batch its delivery joined
instead of for its own turn at the database's write lock, so the webhook answers at the
database's batch rate rather than its transaction rate; alone, a delivery is a batch of one."""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.dialects import postgresql, sqlite

from service.db.engine import Database, utcnow
from service.db.models import Delivery
from service.receive.triage import Triage

log = logging.getLogger(__name__)

MAX_BATCH = 200
BUSY_S = 0.2


@dataclass
class _Pending:
    row: dict[str, Any]
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[bool] = field(repr=False)


def delivery_row(
    delivery_id: str, event: str, payload: dict[str, Any], verdict: Triage
) -> dict[str, Any]:
    """The `deliveries` row of a delivery: a handled one waits for the inbox; an ignored one is
    stored done (so a redelivery is still known) and without its payload."""
    now = utcnow()
    action = payload.get("action")
    return {
        "delivery_id": delivery_id,
        "event": event,
        "action": str(action) if action is not None else None,
        "payload": payload if verdict.handled else None,
        "received_at": now,
        "next_attempt_at": now,
        "done_at": None if verdict.handled else now,
        "outcome": None if verdict.handled else f"ignored: {verdict.why}",
        "attempts": 0,
    }


class DeliveryRecorder:
    """Stores deliveries for the webhook; `record` answers whether the delivery was new."""

    def __init__(self, db: Database, max_batch: int = MAX_BATCH) -> None:
        self.db = db
        self.max_batch = max_batch
        table = Delivery.__table__
        insert = postgresql.insert if db.postgres else sqlite.insert
        self._statement = (
            insert(table)
            .on_conflict_do_nothing(index_elements=["delivery_id"])
            .returning(table.c.delivery_id)
        )
        self._queue: queue.SimpleQueue[_Pending | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._waiting = 0  # requests awaiting their batch (changed on the event loop only)
        self._crowded_at = float("-inf")  # when one last arrived with another waiting

    async def record(
        self, delivery_id: str, event: str, payload: dict[str, Any], verdict: Triage
    ) -> bool:
        """Store the delivery; False when it was already recorded (a redelivery). Raises what
        the database raised (an outage answers 503)."""
        self._ensure_started()
        self._waiting += 1
        if self._waiting > 1:
            self._crowded_at = time.monotonic()
        loop = asyncio.get_running_loop()
        pending = _Pending(
            delivery_row(delivery_id, event, payload, verdict), loop, loop.create_future()
        )
        self._queue.put(pending)
        try:
            return await pending.future
        finally:
            self._waiting -= 1

    def busy(self) -> bool:
        """Whether deliveries are crowding in (one arrived while another waited, in the last
        0.2 s): the background workers then leave the webhook room."""
        return time.monotonic() - self._crowded_at < BUSY_S

    def stop(self) -> None:
        """Store what is queued, then end the writer thread."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(None)
            thread.join(timeout=20)

    def _ensure_started(self) -> None:
        if self._thread is not None:
            return
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="delivery-recorder", daemon=True
                )
                self._thread.start()

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            batch = [first]
            stop = False
            while len(batch) < self.max_batch:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    stop = True
                    break
                batch.append(more)
            self._store(batch)
            if stop:
                return

    def _store(self, batch: list[_Pending]) -> None:
        try:
            stored = self._insert([p.row for p in batch])
        except Exception as exc:
            for p in batch:
                _settle(p, error=exc)
            return
        for p in batch:
            new = p.row["delivery_id"] in stored
            stored.discard(p.row["delivery_id"])  # a second copy in the same batch: a duplicate
            _settle(p, value=new)

    def _insert(self, rows: list[dict[str, Any]]) -> set[str]:
        """Insert `rows` in one transaction, skipping delivery ids already stored; returns the
        ids inserted."""
        with self.db.writes() as session, session.begin():
            # One statement compiled once (cached), sent as an executemany: SQLAlchemy batches
            # the rows into multi-row INSERTs and gathers what RETURNING gave back.
            result = session.connection().execute(self._statement, rows)
            return {row.delivery_id for row in result}


def _settle(p: _Pending, value: bool | None = None, error: BaseException | None = None) -> None:
    def settle() -> None:
        if p.future.done():  # the request went away (client disconnected)
            return
        if error is not None:
            p.future.set_exception(error)
        else:
            p.future.set_result(bool(value))

    try:
        p.loop.call_soon_threadsafe(settle)
    except RuntimeError:  # the loop is closed: nobody is waiting
        log.debug("delivery %s stored after its request ended", p.row["delivery_id"])
