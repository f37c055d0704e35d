"""Whether the backends' devices are usable: each workflow's device check, cached for a
while, with the verdict reported to the service (`/runners/health`) so that it can show why a
runner takes no jobs; a drain (`runner.daemon.fitness`: its jobs kept dying of its own
infrastructure) is reported with it, and takes every backend out.

A verdict is reused for `check_interval_s` (checks can take seconds: they import the device
stack) and redone sooner after `invalidate` (a job errored). The service hears of every change,
and of a sick verdict again every `keepalive_s`, so the runner stays "seen" while not claiming.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from runner.daemon.fitness import Drain
from runner.environment.probe import device_check
from runner.job.sandboxing import scrubbed_env
from runner.link.client import NotHeld, Rejected, ServiceUnavailable
from workflows.spec import WorkflowSpec

log = logging.getLogger("ondemand.runner")
HEALTH_KEEPALIVE_S = 30.0

# What the service hears: healthy, the reason, the drain's record.
State = tuple[bool, str | None, dict[str, object] | None]
# One backend's check: None when it passes, else why not.
CheckFn = Callable[[WorkflowSpec], str | None]
# Tell the service (healthy, reason, backends, the drain's record or None); raises the client's
# errors when it cannot.
ReportFn = Callable[[bool, str | None, list[str], dict[str, object] | None], None]


def run_device_check(
    workflow: WorkflowSpec,
    *,
    home: Path,
    visible_devices: tuple[str, str] | None,
    python: Path | str | None = None,
) -> str | None:
    """Run `workflow.device_check` with `python` (the backend's job interpreter; default the
    runner's own) in a step-like scrubbed environment under `home`; None when it passes, else
    why not."""
    interpreter = str(python or sys.executable)
    argv = [a.replace("{python}", interpreter) for a in workflow.device_check]
    env = scrubbed_env(
        os.environ, home=home, workflow_env=workflow.env, visible_devices=visible_devices,
        inherited=workflow.device.inherit,
    )  # fmt: skip
    return device_check(argv, env, cwd=home).reason


class Health:
    """The device checks of `backends`, cached; reports changes to the service.

    Thread-safe: the slots share one instance, and one check or report runs at a time.
    """

    def __init__(
        self,
        *,
        workflows: Mapping[str, WorkflowSpec],
        backends: Sequence[str],
        check_interval_s: float,
        check: CheckFn,
        report: ReportFn,
        keepalive_s: float = HEALTH_KEEPALIVE_S,
        clock: Callable[[], float] = time.monotonic,
        drain: Callable[[], Drain | None] = lambda: None,
    ) -> None:
        self.workflows = workflows
        self.backends = list(backends)
        self.check_interval_s = check_interval_s
        self.check = check
        self.report = report
        self.keepalive_s = keepalive_s
        self.clock = clock
        self.drain = drain
        self._lock = threading.Lock()
        self._checked_at: dict[str, float] = {}
        self._reasons: dict[str, str | None] = {}
        self._reported: State | None = None  # what the service last heard
        self._reported_at = 0.0
        self._logged: State | None = None  # what the log last said

    def invalidate(self, backend: str) -> None:
        """Check `backend` again before the next claim (say a job on it errored)."""
        with self._lock:
            self._checked_at.pop(backend, None)

    def report_again(self) -> None:
        """Report on the next round even if nothing changed (a new registration has not heard)."""
        with self._lock:
            self._reported = None

    def healthy_backends(self) -> list[str]:
        """The backends whose check passes, checking those due (none while drained); reports
        the verdict if due."""
        with self._lock:
            now = self.clock()
            for backend in self.backends:
                last = self._checked_at.get(backend)
                if last is None or now - last > self.check_interval_s:
                    self._reasons[backend] = self.check(self.workflows[backend])
                    self._checked_at[backend] = now
            healthy = [b for b in self.backends if self._reasons.get(b) is None]
            sick = [f"{b}: {self._reasons[b]}" for b in self.backends if b not in healthy]
            drain = self.drain()
            if drain is not None:
                healthy = []
                sick.insert(0, drain.summary)
            state: State = (not sick, "; ".join(sick) or None, drain and drain.to_json())
            stale = now - self._reported_at > self.keepalive_s
            if state != self._reported or (sick and stale):
                try:
                    self.report(state[0], state[1], self.backends, state[2])
                    self._reported, self._reported_at = state, now
                except (ServiceUnavailable, Rejected, NotHeld) as exc:
                    log.warning("could not report health: %s", exc)
                if state != self._logged:
                    self._logged = state
                    if sick:
                        log.error("not claiming for %s", state[1])
                    else:
                        log.info("device checks pass for %s", ", ".join(healthy))
            return healthy
