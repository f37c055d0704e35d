"""The loop every background worker of the service shares: a daemon thread that runs one round
when kicked or when its last round said something is due, until the service stops. A round
that fails because the database is unreachable is retried in a second, logged once per
outage; one that lost a conflict to another transaction (a deadlock) is retried at once."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from service.db.outage import Outages, is_conflict, is_outage

log = logging.getLogger(__name__)

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


def _first_line(error: BaseException) -> str:
    text = str(getattr(error, "orig", None) or error).strip()
    return text.splitlines()[0][:200] if text else type(error).__name__
