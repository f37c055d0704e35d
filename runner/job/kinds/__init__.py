"""The step kinds: one module (or package, where the kind has parts of its own: `accuracy`
with its re-runs, `benchmark` with its ways to compare and its statistics) per kind a
workflow's step may name, each a `StepRunner` (`context.py`, the one interface) that the job
calls with the step, itself as the `StepContext` and the pull request's tree. A new kind is a
module with a `run` and its line in `KINDS`; one that can start something slow before its
turn (while the steps before it run) also has a line in `HEAD_STARTS`."""

from __future__ import annotations

from runner.job.kinds import accuracy, benchmark, command
from runner.job.kinds.context import HeadStarter, StepRunner
from workflows.spec import StepKind

KINDS: dict[StepKind, StepRunner] = {
    StepKind.accuracy: accuracy.run,
    StepKind.benchmark: benchmark.run,
    StepKind.command: command.run,
}

HEAD_STARTS: dict[StepKind, HeadStarter] = {
    StepKind.benchmark: benchmark.head_start,
}
