"""The lease reaper: requeues or errors jobs whose runner stopped heartbeating."""

from __future__ import annotations

import logging
import threading

from service.queue.jobs import JobQueue
from service.worker import Worker

log = logging.getLogger(__name__)


class LeaseReaper(Worker):
    """Checks leases a few times per lease period (at most every 5 s, at least every 0.25 s)."""

    name = "lease-reaper"

    def __init__(self, jobs: JobQueue, stopping: threading.Event) -> None:
        super().__init__(stopping)
        self.jobs = jobs
        self.interval = min(5.0, max(0.25, jobs.lease_seconds / 4))

    def run_once(self) -> float:
        for job in self.jobs.reap():
            log.info("job %s: lease lapsed -> %s", job.id, job.status)
        return self.interval
