"""Wake a waiting `claim` the moment a job for its backend is enqueued.

In one process: per-backend generation counters and futures, notified from any thread.
Across PostgreSQL replicas: the store sends `pg_notify(CHANNEL, backend)` in the enqueueing
transaction and `PgListener` turns each notification into a local wake-up. Nothing polls.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterable, Sequence

import psycopg

log = logging.getLogger(__name__)

CHANNEL = "ondemand_jobs"
ANY = "*"  # wakes every waiter (a requeue of unknown backend, shutdown)

_Waiter = tuple[frozenset[str], asyncio.AbstractEventLoop, asyncio.Future[None]]


class Wakeup:
    """Generation counters per backend; waiters sleep until one of theirs moves."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._generations: dict[str, int] = {}
        self._waiters: list[_Waiter] = []

    def snapshot(self, backends: Iterable[str]) -> tuple[int, ...]:
        """The current generations of `backends`, to wait on without missing a notify."""
        with self._lock:
            return self._snapshot_locked(sorted(set(backends)))

    def _snapshot_locked(self, backends: Sequence[str]) -> tuple[int, ...]:
        return (self._generations.get(ANY, 0), *(self._generations.get(b, 0) for b in backends))

    def notify(self, backend: str) -> None:
        """A job for `backend` (or ANY) is ready: wake its waiters. Safe from any thread."""
        with self._lock:
            self._generations[backend] = self._generations.get(backend, 0) + 1
            keep = []
            for wanted, loop, fut in self._waiters:
                if backend == ANY or backend in wanted:
                    loop.call_soon_threadsafe(_resolve, fut)
                else:
                    keep.append((wanted, loop, fut))
            self._waiters = keep

    async def wait(self, backends: Iterable[str], since: tuple[int, ...], timeout: float) -> bool:
        """Sleep until a notify for one of `backends` after `since`, or `timeout`; True if woken."""
        wanted = sorted(set(backends))
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        with self._lock:
            if self._snapshot_locked(wanted) != since:
                return True
            entry = (frozenset(wanted), loop, fut)
            self._waiters.append(entry)
        try:
            await asyncio.wait_for(fut, timeout)
            return True
        except TimeoutError:
            return False
        finally:
            with self._lock:
                if entry in self._waiters:
                    self._waiters.remove(entry)


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class PgListener:
    """A thread that LISTENs on CHANNEL and forwards each notification to a Wakeup."""

    def __init__(self, conninfo: str, wakeup: Wakeup) -> None:
        self._conninfo = conninfo
        self._wakeup = wakeup
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pg-listen", daemon=True)
        self.listening = threading.Event()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                with psycopg.connect(self._conninfo, autocommit=True) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    self.listening.set()
                    # A lost notification window after a reconnect: wake everyone once.
                    self._wakeup.notify(ANY)
                    while not self._stop.is_set():
                        for note in conn.notifies(timeout=1.0):
                            self._wakeup.notify(note.payload or ANY)
            except psycopg.Error as exc:
                log.warning("LISTEN connection failed (%s); retrying", exc)
                self.listening.clear()
                self._stop.wait(1.0)
