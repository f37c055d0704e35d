"""The loop every background worker of the service shares: a daemon thread that runs one round
when kicked or when its last round said something is due, until the service stops. A round
that fails because the database is unreachable is retried in a second, logged once per
outage; one that lost a conflict to another transaction (a deadlock) is retried at once.

`RowWorker` is the round of a worker over leased rows (`LeasedRows`: the inbox's deliveries,
the outbox's items), written once: take each due row, try it, finish it or leave it for a
retry with the one retry policy, and say how long until the next one is due."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

from ondemand.retry import RetryPolicy
from service.db.engine import utcnow
from service.db.leases import Due, LeasedRows
from service.db.models import LeasedRow
from service.db.outage import Outages, is_conflict, is_outage, is_transient

log = logging.getLogger(__name__)
R = TypeVar("R", bound=LeasedRow)

IDLE_WAIT_S = 60.0  # with nothing due, look again this often anyway
ERROR_WAIT_S = 1.0
CONFLICT_WAIT_S = 0.05  # a round that lost a deadlock: again almost at once
REST_FACTOR = 10  # while the webhook is busy, a worker rests this many times an item's time
MAX_REST_S = 0.25


class Worker:
    """Subclasses implement `run_once` (seconds until the next round is due, None for idle)."""

    name = "worker"

    def __init__(
        self,
        stopping: threading.Event,
        outages: Outages | None = None,
        busy: Callable[[], bool] | None = None,
    ) -> None:
        self.stopping = stopping
        self.outages = outages
        self.busy = busy
        self._kick = threading.Event()
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)

    def run_once(self) -> float | None:
        raise NotImplementedError

    @contextmanager
    def paced(self) -> Iterator[None]:
        """Around one item: afterwards, while the webhook is `busy`, rest ten times as long as
        the item took (at most 0.25 s), so the workers take at most a tenth of the process.
        The webhook shares this process and its GIL, and a delivery waits while a worker runs;
        accepted work waits a little and is caught up once the crowd has passed."""
        started = time.monotonic()
        yield
        if self.busy is not None and self.busy():
            time.sleep(min(REST_FACTOR * (time.monotonic() - started), MAX_REST_S))

    def kick(self) -> None:
        """Something arrived: run a round now."""
        self._kick.set()

    def start(self) -> None:
        self._thread.start()

    def join(self) -> None:
        self._kick.set()
        self._thread.join(timeout=20)

    def _run(self) -> None:
        while not self.stopping.is_set():
            self._kick.clear()
            try:
                wait = self.run_once()
            except Exception as exc:
                wait = ERROR_WAIT_S
                if is_conflict(exc):
                    log.info("%s round lost a conflict (%s); again", self.name, _first_line(exc))
                    wait = CONFLICT_WAIT_S
                elif self.outages is not None and is_outage(exc):
                    self.outages.failed(exc, f"{self.name} round")  # logged once an outage
                else:
                    log.exception("%s round failed; retrying", self.name)
            self._kick.wait(timeout=IDLE_WAIT_S if wait is None else max(0.01, wait))


class RowWorker(Worker, Generic[R]):
    """A worker whose round goes through the due rows of one table (`rows`), in order. Each
    row is tried once a round: taken (locked, its attempt counted), `attempt`ed while its lock
    is held, then finished with the attempt's outcome; a try that raised is the subclass's to
    judge (`failed`: retry it, park it or give it up; `retry` waits by the one retry policy).
    A database outage or a lost conflict is not the row's fault: it ends the round, which the
    shared loop runs again, and the row is tried again uncounted once its lock lapses."""

    def __init__(
        self,
        rows: LeasedRows[R],
        policy: RetryPolicy,
        stopping: threading.Event,
        outages: Outages | None = None,
        busy: Callable[[], bool] | None = None,
    ) -> None:
        super().__init__(stopping, outages, busy)
        self.rows = rows
        self.policy = policy
        self._finished = 0  # rows finished so far: a pass that finished one is followed by another

    def attempt(self, row: R) -> str:
        """Try one row; its outcome, kept when it is finished. Raises to say it failed."""
        raise NotImplementedError

    def failed(self, row: R, error: Exception) -> float | None:
        """After a failed try: seconds until the row's retry, None when it is done."""
        raise NotImplementedError

    def finished(self, row: R, outcome: str) -> None:
        """After a row is finished (nothing by default)."""

    def due(self) -> Iterable[Due]:
        """The rows a round may try, in order (every pending one by default)."""
        return self.rows.pending()

    def paused_for(self) -> float:
        """Seconds every try must wait now (a rate limit, say): the round stops for them."""
        return 0.0

    def run_once(self) -> float | None:
        """Try every due row; returns seconds until the next is due (None: nothing pending).
        A pass that finished a row is followed by another at once: a row `due` held back
        behind it (the outbox's next item of the same key) need not wait for a kick."""
        while True:
            paused = self.paused_for()
            if paused > 0:
                return paused
            finished = self._finished
            next_due: float | None = None
            for row in self.due():
                if self.stopping.is_set():
                    return next_due
                wait = (self.rows.due_at(row) - utcnow()).total_seconds()
                if wait > 0:
                    next_due = _sooner(next_due, wait)
                    continue
                with self.paced():
                    next_due = _sooner(next_due, self.try_row(row.id))
                paused = self.paused_for()
                if paused > 0:
                    return paused
            if self._finished == finished:
                return next_due

    def try_row(self, row_id: int) -> float | None:
        """Take and try one row; seconds until its retry, None when it is finished (or was
        not there to take: done, locked by another worker, or not due)."""
        row = self.rows.take(row_id)
        if row is None:
            return None
        try:
            with self.rows.held(row_id):
                outcome = self.attempt(row)
        except Exception as exc:
            if is_transient(exc):
                raise  # not this row's fault: the round is retried, nothing is counted
            return self.failed(row, exc)
        self.rows.finish(row_id, outcome)
        self._finished += 1
        self.finished(row, outcome)
        return None

    def retry(self, row: R, retry_after: float | None, error: str) -> float:
        """Try `row` again after the retry policy's wait for its attempts (`retry_after`, the
        server's own word, wins); returns the wait."""
        wait = self.policy.delay(row.attempts, retry_after)
        self.rows.retry(row.id, wait, error)
        return wait


def _sooner(a: float | None, b: float | None) -> float | None:
    """The sooner of two waits, None standing for none."""
    if a is None:
        return b
    return a if b is None else min(a, b)


def _first_line(error: BaseException) -> str:
    text = str(getattr(error, "orig", None) or error).strip()
    return text.splitlines()[0][:200] if text else type(error).__name__
