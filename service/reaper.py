"""The lease reaper: a thread that requeues or errors jobs whose runner stopped heartbeating."""

from __future__ import annotations

import logging
import threading

from service.store import Store

log = logging.getLogger(__name__)


class LeaseReaper:
    """Checks leases a few times per lease period (at most every 5 s, at least every 0.25 s)."""

    def __init__(self, store: Store, stop: threading.Event) -> None:
        self.store = store
        self.stop = stop
        self.interval = min(5.0, max(0.25, store.lease_seconds / 4))
        self._thread = threading.Thread(target=self._run, name="lease-reaper", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self) -> None:
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self.stop.wait(self.interval):
            try:
                for job in self.store.reap():
                    log.info("job %s: lease lapsed -> %s", job.id, job.status)
            except Exception:
                log.exception("lease reaper failed; retrying")
