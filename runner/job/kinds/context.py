"""What a step kind is given: the job as a `StepContext`, the tree it runs in, and the two
shapes a kind's code takes (`StepRunner`, `Comparison`). `Stop` ends a job at a step;
`interrupted` records a step that did not end by itself and stops the job there.

The kinds import this module, never `runner.job.execute`, whose job implements the context.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol, runtime_checkable

from runner.environment.pyenv import PythonEnvError
from runner.job.steps import OutputSink, StepOutcome
from workflows.models import (
    AccuracyResult,
    BenchmarkResult,
    FailureClasses,
    JobSpec,
    JobStatus,
    ProfileResult,
    Progress,
    StepResult,
    StepStatus,
)
from workflows.repo_config import RepoConfig
from workflows.spec import Step, WorkflowSpec

OP_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,63}$")  # the job's operator, and those tests name


class Stop(Exception):
    """Ends the job early with `status` after `step` (not a bug: a verdict)."""

    def __init__(self, status: JobStatus, step: str, message: str) -> None:
        super().__init__(message)
        self.status, self.step, self.message = status, step, message


@dataclass(frozen=True)
class Tree:
    """A checkout ready for steps: its path, the Python its steps run and their environment."""

    path: Path
    python: Path
    env: dict[str, str]


@dataclass(frozen=True)
class MergeBase:
    """The merge base a benchmark is compared with: its commit and its checkout."""

    sha: str
    path: Path


class HeadStart(Protocol):
    """What a step started ahead of itself, while the steps before it ran (its benchmark
    workers): the step takes it when it begins (`StepContext.take_head_start`); the job stops
    it if the step never does."""

    def stop(self, grace_s: float) -> None: ...


@runtime_checkable
class StepContext(Protocol):
    """The job as its steps see it: what it runs, where, how a process of it runs, and where
    its results go. `runner.job.execute` implements it; a kind uses nothing else of the job."""

    spec: JobSpec
    workflow: WorkflowSpec
    # Where results go, read into the JobResult when the job ends.
    accuracy: AccuracyResult | None
    benchmark: BenchmarkResult | None
    operators: list[str]
    unknown_op: bool
    close_matches: list[str]
    failures: FailureClasses | None
    profile: ProfileResult | None

    @property
    def job_dir(self) -> Path: ...

    @property
    def artifacts(self) -> Path:
        """The step's output directory (`{artifacts}`), the job user's."""
        ...

    @property
    def plugins(self) -> Path:
        """Where the runner's pytest plugins are copied for the job to load."""
        ...

    @property
    def owner(self) -> tuple[int, int] | None:
        """Who a step's files belong to: the job user, when steps run as one."""
        ...

    @property
    def elapsed_s(self) -> float:
        """Seconds since the job started (what a comparison's `verdict_s` has left)."""
        ...

    @property
    def cancel(self) -> threading.Event: ...

    @property
    def grace_s(self) -> float: ...

    @property
    def on_output(self) -> OutputSink: ...

    @property
    def on_step_start(self) -> Callable[[int], None] | None: ...

    @property
    def on_progress(self) -> Callable[[Progress], None]: ...

    def log(self, text: str) -> None: ...

    def record(self, result: StepResult) -> None:
        """Add a step's result to the job's timeline."""
        ...

    def confined(self, argv: list[str]) -> list[str]:
        """`argv` as the job's jail runs it (unchanged where steps run unconfined)."""
        ...

    def argv_for(
        self, step: Step, tree: Tree, artifacts: Path, extra: dict[str, str] | None = None
    ) -> tuple[list[str], dict[str, str]]:
        """The step's argv in `tree` and its placeholders' values; `artifacts` becomes the
        job user's."""
        ...

    def run(
        self, step: Step, tree: Tree, artifacts: Path, extra: dict[str, str] | None = None
    ) -> tuple[StepOutcome, dict[str, str]]:
        """Run the step in `tree`, confined, logged and shown as the current step, to its end,
        timeout or the job's cancel; its outcome and placeholders' values."""
        ...

    def prepare(self, checkout: Path) -> Tree:
        """`checkout` with its Python environment; raises PythonEnvError."""
        ...

    def base_tree(self, step: Step) -> MergeBase | None:
        """The merge base to compare `step` with, or None (said in the log or as a skipped
        step)."""
        ...

    def settings(self) -> RepoConfig:
        """The repository's settings file as the job's base has it (`.github/ondemand.yml`,
        never the head's); the defaults where there is none or it has a problem."""
        ...

    def durations(self) -> Path | None:
        """The test times of the repository's last trusted build, where known."""
        ...

    def take_head_start(self, step: Step) -> HeadStart | None:
        """What `step`'s kind started ahead of it (`HeadStarter`), now the step's to finish
        and stop; None where nothing was."""
        ...


StepRunner = Callable[[Step, StepContext, Tree], None]
"""A step kind: runs `step` in the pull request's tree, records its result and puts what it
found in the context; raises `Stop` to end the job there."""

HeadStarter = Callable[[Step, StepContext, Tree, float], HeadStart | None]
"""What a step kind starts ahead of its step, given how long the steps before it may take
(their timeouts): None where it starts nothing."""

Comparison = Callable[[Step, StepContext, Tree, MergeBase], BenchmarkResult | None]
"""A way of timing a benchmark step before → after: the merged result of both trees, or None
where this way cannot (the benchmark step then tries the next)."""


def now() -> datetime:
    return datetime.now(UTC)


def step_result(
    name: str, outcome: StepOutcome, status: StepStatus, message: str | None
) -> StepResult:
    """A step's result from its process's outcome; the log's tail unless it succeeded."""
    return StepResult(
        name=name,
        status=status,
        exit_code=outcome.exit_code,
        duration_s=round(outcome.duration_s, 3),
        message=message,
        log_tail=None if status is StepStatus.succeeded else outcome.tail,
    )


def base_step(step: Step) -> str:
    """The name of a step's comparison with the merge base, as results and logs show it."""
    return f"{step.name} (merge base)"


def base_side(job: StepContext, step: Step, base: MergeBase) -> Tree | None:
    """The merge base's tree with its environment made; None, said as a skipped step, where
    the environment cannot be made (the pull request's run then goes alone)."""
    try:
        return job.prepare(base.path)
    except PythonEnvError as exc:
        job.record(
            StepResult(
                name=base_step(step), status=StepStatus.skipped,
                message=f"could not prepare the merge base: {exc}",
            )
        )  # fmt: skip
        return None


def succeeded(job: StepContext, name: str, elapsed_s: float, message: str) -> None:
    """Log and record a step of no process of its own (rounds over workers or processes)."""
    job.log(f"{name}: {message}")
    job.record(
        StepResult(
            name=name, status=StepStatus.succeeded, duration_s=round(elapsed_s, 3),
            message=message,
        )
    )  # fmt: skip


def interrupted(job: StepContext, name: str, outcome: StepOutcome, timeout_s: int) -> None:
    """Record and stop for a step that did not end by itself (not started, cancelled, timed
    out); nothing for one that did."""
    if outcome.start_error is not None:
        status, end, message = StepStatus.errored, JobStatus.errored, outcome.start_error
    elif outcome.cancelled:
        status, end, message = StepStatus.cancelled, JobStatus.cancelled, "cancelled"
    elif outcome.timed_out:
        status, end = StepStatus.timed_out, JobStatus.timed_out
        message = f"timed out after {timeout_s}s; its process group was killed"
    else:
        return
    job.record(step_result(name, outcome, status, message))
    raise Stop(end, name, message)
