"""A job's heartbeat: renews its lease every third of it while the job runs, and turns the
service's answers into the job's outcome: cancel requested (the steps watch the `cancel`
Event), or lost (a 404: the job is no longer ours, so it is stopped and not reported).

Beside it, the job's open channel (`POST /jobs/{id}/events`, a long-poll the service answers
the moment the job is cancelled or superseded): a cancel reaches the steps within the time a
wake-up takes, not at the next heartbeat. Where the channel fails, the heartbeat still carries
the cancel.

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

from runner.link.client import HeartbeatAnswer, NotHeld, Rejected, ServiceUnavailable
from workflows.models import JobSpec

log = logging.getLogger("ondemand.runner")
MIN_INTERVAL_S = 0.2
JOIN_TIMEOUT_S = 30.0
CHANNEL_WAIT_S = 25.0  # one long-poll of the open channel
CHANNEL_RETRY_S = 1.0  # after the channel failed


class LeaseClient(Protocol):
    """The calls a heartbeat needs (runner.link.client.ServiceClient has them)."""

    def heartbeat(self, job_id: int) -> HeartbeatAnswer: ...

    def events(self, job_id: int, wait_s: float) -> HeartbeatAnswer: ...


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
        self._outcome = threading.Lock()  # nothing changes the outcome once the block ended
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{spec.id}", daemon=True)
        # Not joined: its long-poll may still be open when the job ends; it then acts on nothing.
        self._channel = threading.Thread(
            target=self._listen, name=f"channel-{spec.id}", daemon=True
        )

    @property
    def lost(self) -> bool:
        """The service said the job is no longer this runner's: do not report it."""
        return self._lost.is_set()

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        self._channel.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        with self._outcome:
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

    def _listen(self) -> None:
        """Hold the job's open channel until the job ends, is cancelled or is lost."""
        while not self._done.is_set() and not self.cancel.is_set():
            try:
                answer = self.client.events(self.job_id, CHANNEL_WAIT_S)
            except NotHeld:
                self._lose()
                return
            except (ServiceUnavailable, Rejected) as exc:
                log.debug("job %s: open channel failed: %s", self.job_id, exc)
                self._done.wait(CHANNEL_RETRY_S)
                continue
            if answer.cancel:
                self._cancelled(answer.reason)
                return

    def _lose(self) -> None:
        with self._outcome:
            if self._done.is_set():
                return  # the job ended meanwhile: a 404 now is its completion, not a loss
            log.warning("job %s: the service says it is not ours any more; stopping", self.job_id)
            self._lost.set()
            self.cancel.set()

    def _cancelled(self, reason: str | None) -> None:
        with self._outcome:
            if self._done.is_set() or self.cancel.is_set():
                return
            log.info("job %s: cancel requested: %s", self.job_id, reason)
            self.reason = reason or "cancelled"
            self.cancel.set()

    def _beat(self) -> bool:
        """One heartbeat; False when the job is lost and the thread should end."""
        try:
            answer = self.client.heartbeat(self.job_id)
        except NotHeld:
            self._lose()
            return False
        except (ServiceUnavailable, Rejected) as exc:
            log.warning("job %s: heartbeat failed: %s", self.job_id, exc)
            return True
        if answer.cancel:
            self._cancelled(answer.reason)
        return True
