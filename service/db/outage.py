"""Database outages: which errors mean the database cannot be reached or is busy (not a bug in
the service), and one log line when an outage starts and one when it ends, instead of a
traceback per request and per worker round.

A transaction that lost to another (PostgreSQL's deadlock detector or a serialization
failure) is not an outage: the database is up and asks for the transaction again. Those are
`is_conflict`, tried again without declaring the database down."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from sqlalchemy import exc as sa_exc

log = logging.getLogger(__name__)

RETRY_AFTER_S = 5  # what a 503 tells the caller
SETTLE_S = 1.0  # an outage ends at the first success this long after its last failure


# SQLSTATEs of a transaction the server aborted for another's sake: serialization_failure,
# deadlock_detected (class 40, "transaction rollback", which the driver files as operational).
CONFLICT_SQLSTATES = frozenset({"40001", "40P01"})


def is_conflict(error: BaseException) -> bool:
    """Whether `error` is a transaction that lost to another: try it again, the database is up."""
    orig = getattr(error, "orig", None)
    return (
        isinstance(error, sa_exc.DBAPIError)
        and getattr(orig, "sqlstate", None) in CONFLICT_SQLSTATES
    )


def is_transient(error: BaseException) -> bool:
    """Whether trying again later may succeed: an outage or a lost conflict."""
    return is_outage(error) or is_conflict(error)


def is_outage(error: BaseException) -> bool:
    """Whether `error` says the database is unreachable, restarting or busy."""
    if is_conflict(error):
        return False
    if isinstance(error, sa_exc.OperationalError | sa_exc.InterfaceError | sa_exc.TimeoutError):
        return True
    return isinstance(error, sa_exc.DBAPIError) and error.connection_invalidated


class Outages:
    """The database's state as the service saw it: `failed` on an outage error, `succeeded`
    on a working connection; each outage is logged when it starts (with its first error) and
    when it ends (with its length and the number of failed calls)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._since: float | None = None
        self._last_failure: float | None = None
        self._failures = 0  # of the current outage

    @property
    def down(self) -> bool:
        return self._since is not None

    @property
    def last_failure(self) -> float | None:
        """When (on the clock given, monotonic) a call last failed; None if none has."""
        return self._last_failure

    def failed(self, error: BaseException, where: str) -> None:
        now = self._clock()
        with self._lock:
            self._failures += 1
            self._last_failure = now
            if self._since is not None:
                return
            self._since = now
        reason = str(getattr(error, "orig", None) or error).strip().splitlines()[0][:300]
        log.error("database unreachable (%s: %s); answering 503 until it is back", where, reason)

    def succeeded(self) -> None:
        if self._since is None:  # the common case: no lock
            return
        now = self._clock()
        with self._lock:
            last = self._last_failure or 0.0
            if self._since is None or now - last < SETTLE_S:
                return
            length, failures = now - self._since, self._failures
            self._since, self._failures = None, 0
        log.warning("database back after %.1fs (%d calls failed meanwhile)", length, failures)
