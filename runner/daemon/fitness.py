"""Whether this runner can run jobs, judged from how its last jobs ended: a runner whose jobs
keep dying of its own infrastructure (a workspace it cannot clean, a job Python that is gone,
a crash of its own code) is drained: it claims nothing until its environment check passes
again or an operator undrains it.

The decision is pure (`blame`, `drained`); `Fitness` keeps the outcomes, the drain's record
in the state directory (`drained.json`: what `ondemand doctor runner` reads, and what an
operator removes, or `ondemand runner --undrain` does, to undrain) and the periodic re-check.
What a job's error says of whom:

- a crash of the runner's own code (the step `runner`) is the runner's;
- a checkout that fails because the commit could not be fetched (gone from a force-pushed pull
  request, or a remote no runner reaches now: git says "not found" for both) is the job's;
  any other failed checkout (a worktree that cannot be made or removed, a mirror that
  cannot be written) is the runner's;
- any other error (the environment, a step that could not start) is the runner's when its
  environment check fails right after (its job Python does not run, its directories cannot
  be written, its wheelhouse is gone), else the tree's (a pull request whose own build is
  broken). A job lost to the runner is handed back for another runner (the daemon's
  `interrupt`), whose claims then skip it (`handed_back`);
- a job that ran its steps (passed, failed, timed out) shows the runner works; a cancel says
  nothing either way.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from workflows.models import JobResult, JobStatus

log = logging.getLogger("ondemand.runner")
DEFAULT_DRAIN_AFTER = 3  # consecutive jobs lost to the runner's own faults
MAX_DRAIN_AFTER = 100  # the most jobs a drain's report names (the service's bound)
DRAIN_FILE = "drained.json"
KEPT = 20  # outcomes remembered (and jobs handed back that this runner will not claim again)
ERROR_CHARS = 300  # of a job's error, in the drain's record and the hand-back's reason
CHECK_TIMEOUT_S = 30.0


class Blame(StrEnum):
    """Whose fault a job's end was."""

    runner = "runner"  # this runner's infrastructure: counts towards a drain
    job = "job"  # the pull request's (or nobody's): says nothing of the runner
    ran = "ran"  # the job ran its steps: the runner works


@dataclass(frozen=True)
class Outcome:
    """How one job ended on this runner, and whose fault that was."""

    job_id: int
    blame: Blame
    step: str | None = None
    error: str | None = None

    def describe(self) -> str:
        return f"job {self.job_id} ({self.step or '?'}: {self.error or 'no message'})"


@dataclass(frozen=True)
class Drain:
    """A drained runner: the jobs whose errors drained it (oldest first), and since when."""

    jobs: tuple[Outcome, ...]
    since: float  # seconds since the epoch

    @property
    def reason(self) -> str:
        if not self.jobs:
            return "drained (its record in the state directory does not read)"
        return f"drained: its last {len(self.jobs)} jobs ended in infrastructure errors: " + (
            "; ".join(o.describe() for o in self.jobs)
        )

    @property
    def summary(self) -> str:
        """The reason without the errors, which may name a private repository: what the
        service is told as the runner's health (the errors go in `to_json`, which it shows
        where the job is public)."""
        if not self.jobs:
            return self.reason
        ids = ", ".join(str(o.job_id) for o in self.jobs)
        return f"drained: its last {len(self.jobs)} jobs ended in infrastructure errors ({ids})"

    def to_json(self) -> dict[str, object]:
        return {
            "since": self.since,
            "jobs": [{"id": o.job_id, "step": o.step, "error": o.error} for o in self.jobs],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Drain:
        jobs = data.get("jobs")
        since = data.get("since")
        if not isinstance(jobs, list) or not isinstance(since, int | float):
            raise ValueError("not a drain record")
        return cls(
            tuple(
                Outcome(int(j["id"]), Blame.runner, j.get("step"), j.get("error"))
                for j in jobs
                if isinstance(j, dict)
            ),
            float(since),
        )


def needs_check(result: JobResult) -> bool:
    """Whether the job's end can only be blamed after the environment check (`blame`): an
    error past the checkout, and a test failure (tests fail when the runner's environment
    breaks under them, its job Python removed mid-run: not the pull request's failures)."""
    if result.status is JobStatus.failed:
        return True
    return result.status is JobStatus.errored and result.error_step not in (
        "runner",
        "checkout",
        "setup",
    )


def blame(result: JobResult, check: str | None = None) -> Blame:
    """Whose fault the job's end was; `check` is the environment check's verdict right after
    it (None: passes), wanted where `needs_check` says so."""
    if result.status is JobStatus.failed:
        return Blame.runner if check is not None else Blame.ran
    if result.status in (JobStatus.succeeded, JobStatus.timed_out):
        return Blame.ran
    if result.status is not JobStatus.errored:
        return Blame.job  # cancelled: nobody's
    step, message = result.error_step, result.error_message or ""
    if step == "runner":
        return Blame.runner
    if step == "setup":
        return Blame.job  # the job's own fields (an operator name that is none)
    if step == "checkout":
        gone = " not found in " in message or "not a commit SHA" in message
        return Blame.job if gone else Blame.runner
    return Blame.runner if check is not None else Blame.job


def outcome(job_id: int, result: JobResult, check: str | None = None) -> Outcome:
    """The job's outcome, its error cut to a line."""
    judged = blame(result, check)
    if result.status is JobStatus.failed and judged is Blame.runner:
        # Its tests failed, and then the runner's own check: the check says why.
        return Outcome(job_id, judged, "environment", " ".join(str(check).split())[:ERROR_CHARS])
    error = " ".join((result.error_message or "").split())[:ERROR_CHARS] or None
    return Outcome(job_id, judged, result.error_step, error)


def drained(outcomes: Sequence[Outcome], limit: int, now: float = 0.0) -> Drain | None:
    """Given the last outcomes (oldest first): drained when the `limit` newest that count
    (the runner's or a job that ran) are all the runner's, with those jobs; else None.
    A limit of 0 never drains."""
    if limit <= 0:
        return None
    streak: list[Outcome] = []
    for o in reversed(outcomes):
        if o.blame is Blame.ran:
            break
        if o.blame is Blame.runner:
            streak.append(o)
            if len(streak) == limit:
                return Drain(tuple(reversed(streak)), now)
    return None


def environment_check(
    pythons: Iterable[Path], directories: Iterable[Path], sources: Iterable[Path] = ()
) -> str | None:
    """The runner's own environment: each job Python runs, each working directory takes a
    file, each directory jobs install from (the wheelhouse) is there. None when all is well,
    else what is not."""
    for python in pythons:
        try:
            proc = subprocess.run(
                [str(python), "-c", "pass"],
                capture_output=True,
                text=True,
                timeout=CHECK_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"job Python {python} does not run: {exc}"
        if proc.returncode != 0:
            tail = " ".join(proc.stderr.split())[-200:]
            return f"job Python {python} exited {proc.returncode}: {tail}"
    for source in sources:
        if not source.is_dir():
            return f"{source} is not a directory any more"
    for directory in directories:
        probe = directory / f".ondemand-check-{os.getpid()}"
        try:
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            return f"{directory} cannot be written: {exc}"
    return None


# Say the drain's state changed (None: no longer drained).
OnChange = Callable[[Drain | None, str], None]


class Fitness:
    """The outcomes of this runner's jobs and its drain, kept in `state_dir/drained.json`
    across restarts. While drained, `poll` re-runs the environment check every
    `check_interval_s` and undrains when it passes (on probation: the next job lost to the
    runner drains it again at once), or at once when the file is gone (an operator's undrain).
    Thread-safe: the slots share one."""

    def __init__(
        self,
        *,
        state_dir: Path,
        limit: int,
        check: Callable[[], str | None],
        check_interval_s: float,
        on_change: OnChange = lambda drain, why: None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = state_dir / DRAIN_FILE
        self.limit = limit
        self.check = check
        self.check_interval_s = check_interval_s
        self.on_change = on_change
        self.clock = clock
        self._lock = threading.Lock()
        self._outcomes: list[Outcome] = []
        self._probation = False
        self._checked_at = 0.0
        self.handed_back: list[int] = []  # jobs this runner could not run: not claimed again
        self._drain = read_drain(self.path)
        if self._drain is not None:
            self._checked_at = clock()
            log.error("%s (since an earlier run)", self._drain.reason)

    @property
    def drain(self) -> Drain | None:
        with self._lock:
            return self._drain

    def record(self, result: Outcome) -> Drain | None:
        """Add a job's outcome; the drain it started, if it started one."""
        with self._lock:
            if result.blame is Blame.runner:
                self.handed_back = [*self.handed_back, result.job_id][-KEPT:]
            self._outcomes = [*self._outcomes, result][-KEPT:]
            if result.blame is Blame.ran:
                self._probation = False
            if self._drain is not None:
                return None
            drain = drained(self._outcomes, 1 if self._probation else self.limit, self.clock())
            if drain is None:
                return None
            self._drain, self._checked_at = drain, self.clock()
            write_drain(self.path, drain)
        self.on_change(drain, "")
        return drain

    def poll(self) -> Drain | None:
        """While drained: undrain when an operator removed the record, or when the
        environment check is due and passes. The drain still in force, if any."""
        with self._lock:
            drain = self._drain
            if drain is None:
                return None
            if not self.path.exists():
                why = "undrained by an operator (its drain record was removed)"
                self._undrain(probation=False)
            elif self.clock() - self._checked_at >= self.check_interval_s:
                self._checked_at = self.clock()
                failing = self.check()
                if failing is not None:
                    log.info("still drained: environment check: %s", failing)
                    return drain
                why = "undrained: its environment check passes"
                self._undrain(probation=True)
                self.path.unlink(missing_ok=True)
            else:
                return drain
        self.on_change(None, why)
        return None

    def _undrain(self, *, probation: bool) -> None:
        self._drain = None
        self._outcomes = []
        self._probation = probation


def read_drain(path: Path) -> Drain | None:
    """The drain recorded at `path`; None when there is none. A record that does not read
    still drains (it says so): only an operator or a passing check lifts it."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return Drain((), 0.0)
    try:
        return Drain.from_json(data)
    except (ValueError, KeyError, TypeError, AttributeError):
        return Drain((), 0.0)


def write_drain(path: Path, drain: Drain) -> None:
    """Record `drain` at `path`, atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".tmp")
    partial.write_text(json.dumps(drain.to_json(), indent=1) + "\n")
    partial.replace(path)


def undrain(state_dir: Path) -> Drain | None:
    """An operator's undrain: remove the record a running daemon watches; what it said."""
    path = state_dir / DRAIN_FILE
    drain = read_drain(path)
    path.unlink(missing_ok=True)
    return drain
