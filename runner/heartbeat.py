"""A job's heartbeat: renews its lease every third of it while the job runs, and turns the
service's answers into the job's outcome: cancel requested (the steps watch the `cancel`
Event), or lost (a 404: the job is no longer ours, so it is stopped and not reported).

    with Heartbeat(client, spec, cancel) as beat:
        result = execute(...)
    if beat.lost: ...        # do not report
    beat.reason              # why the service cancelled it, if it did
"""

from __future__ import annotations

import logging
import threading
from types import TracebackType
from typing import Protocol

from runner.client import HeartbeatAnswer, NotHeld, Rejected, ServiceUnavailable
from workflows.models import JobSpec

log = logging.getLogger("ondemand.runner")
MIN_INTERVAL_S = 0.2
JOIN_TIMEOUT_S = 30.0


class LeaseClient(Protocol):
    """The one call a heartbeat needs (runner.client.ServiceClient has it)."""

    def heartbeat(self, job_id: int) -> HeartbeatAnswer: ...


class Heartbeat:
    """Owns one job's heartbeat thread, from `__enter__` to `__exit__`, and its outcome.

    `cancel` is shared with whoever else may cancel the job (the daemon's second signal); the
    heartbeat sets it when the service asks, or when the job is lost. `reason` is the service's
    reason, set only when the service's cancel came first. Read `lost` and `reason` after the
    block.
    """

    def __init__(
        self,
        client: LeaseClient,
        spec: JobSpec,
        cancel: threading.Event,
        interval_s: float | None = None,
    ) -> None:
        self.client = client
        self.job_id = spec.id
        self.cancel = cancel
        self.interval_s = (
            interval_s if interval_s is not None else max(spec.lease_seconds / 3, MIN_INTERVAL_S)
        )
        self.reason: str | None = None
        self._lost = threading.Event()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{spec.id}", daemon=True)

    @property
    def lost(self) -> bool:
        """The service said the job is no longer this runner's: do not report it."""
        return self._lost.is_set()

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._done.set()
        self._thread.join(timeout=JOIN_TIMEOUT_S)

    def _run(self) -> None:
        # The first beat goes out at once: it tells the service the claim reached a live
        # runner (a claim that is never acknowledged goes back to the queue).
        if not self._beat():
            return
        while not self._done.wait(self.interval_s):
            if not self._beat():
                return

    def _beat(self) -> bool:
        """One heartbeat; False when the job is lost and the thread should end."""
        try:
            answer = self.client.heartbeat(self.job_id)
        except NotHeld:
            log.warning("job %s: the service says it is not ours any more; stopping", self.job_id)
            self._lost.set()
            self.cancel.set()
            return False
        except (ServiceUnavailable, Rejected) as exc:
            log.warning("job %s: heartbeat failed: %s", self.job_id, exc)
            return True
        if answer.cancel and not self.cancel.is_set():
            log.info("job %s: cancel requested: %s", self.job_id, answer.reason)
            self.reason = answer.reason or "cancelled"
            self.cancel.set()
        return True
