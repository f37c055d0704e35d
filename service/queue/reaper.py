"""The lease reaper: requeues or errors jobs whose runner stopped heartbeating.

A lease that lapsed while the service could not hear heartbeats (it was down, or its database
was) says nothing about the runner: for one lease period after the service starts and after
the database last failed, nothing is reaped, so live runners heartbeat first and a job is
never run twice while its runner works on it."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from service.queue.jobs import JobQueue
from service.queue.runners import RunnerRegistry
from service.worker import Worker

log = logging.getLogger(__name__)
FORGET_EVERY_S = 60.0  # how often unseen runners are looked for


class LeaseReaper(Worker):
    """Checks leases a few times per lease period (at most every 5 s, at least every 0.25 s),
    and once a minute removes the runners unseen for `forget_days`."""

    name = "lease-reaper"

    def __init__(
        self,
        jobs: JobQueue,
        stopping: threading.Event,
        clock: Callable[[], float] = time.monotonic,
        runners: RunnerRegistry | None = None,
        forget_days: float = 14.0,
    ) -> None:
        super().__init__(stopping, jobs.db.outages)
        self.jobs = jobs
        self.runners = runners
        self.forget_days = forget_days
        self._next_forget = 0.0
        self.interval = min(5.0, max(0.25, jobs.lease_seconds / 4))
        self.grace_s = float(jobs.lease_seconds)
        self._clock = clock
        self._started = clock()

    def deaf_for(self) -> float:
        """Seconds until leases may be reaped again (0: now)."""
        outage = self.jobs.db.outages.last_failure
        heard_from = max(self._started, outage if outage is not None else self._started)
        return max(0.0, heard_from + self.grace_s - self._clock())

    def run_once(self) -> float:
        wait = self.deaf_for()
        if wait > 0:
            return min(wait, self.interval)
        for job in self.jobs.reap():
            log.info("job %s: lease lapsed -> %s", job.id, job.status)
        if self.runners is not None and self._clock() >= self._next_forget:
            self._next_forget = self._clock() + FORGET_EVERY_S
            for name in self.runners.forget_unseen(self.forget_days):
                log.info("runner %s unseen for %g days: removed", name, self.forget_days)
        return self.interval
