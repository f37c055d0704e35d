"""The benchmark step: the pull request's benchmark, compared with its merge base where the
job has one, each row's change judged from its rounds (`stats`); the result becomes
`job.benchmark`. This package holds the step and its parts: one run and its rows (`measure`),
the ways to compare (`compare_*`), the ABBA rounds loop and the merging of their samples
(`comparison`), the benchmark workers and the files they are spoken to through
(`bench_workers`), what the rounds say (`stats`), and `/test profile`'s pass over the rows
that changed most (`profiling`, its traces read by `traces`). Which way it compares is the step's to
say:

- `compare.argv`: in one process (`compare_in_process`), else in separate processes;
- `compare.workers`: in a worker per tree (`compare_workers`), else in separate processes;
- neither: in separate processes (`compare_processes`), which every way falls back to.

`head_start` starts what the step may start while the steps before it run (the workers).
"""

from __future__ import annotations

from runner.job.kinds.benchmark import (
    compare_in_process,
    compare_processes,
    compare_workers,
    measure,
    profiling,
    stats,
)
from runner.job.kinds.context import Comparison, HeadStart, MergeBase, StepContext, Tree
from workflows.models import BenchmarkResult, StepResult, StepStatus
from workflows.spec import Step


def run(step: Step, job: StepContext, tree: Tree) -> None:
    """Benchmark (unless the job says `--no-bench`: a skipped step) and keep the result."""
    if not job.spec.options.bench:
        job.record(StepResult(name=step.name, status=StepStatus.skipped, message="--no-bench"))
        return
    job.benchmark = compared(step, job, tree)
    if job.spec.options.profile:  # after the verdict's numbers, which it never changes
        job.profile = profiling.profile(step, job, tree, job.benchmark)


def head_start(step: Step, job: StepContext, tree: Tree, wait_s: float) -> HeadStart | None:
    """What the step starts ahead, while the steps before it run (up to `wait_s`): its
    workers, where it compares in workers."""
    return compare_workers.head_start(step, job, tree, wait_s)


def compared(step: Step, job: StepContext, tree: Tree) -> BenchmarkResult:
    """The step's benchmark, compared with the merge base where there is one (by the first
    of the step's ways that can, else in separate processes), else the plain run; on the
    workers the job started ahead of the step where it did. A failed run of the pull
    request's benchmark stops the job."""
    started = job.take_head_start(step)
    if isinstance(started, compare_workers.Started):
        return _against(compare_workers.rounds(step, job, started), started.base)
    base = job.base_tree(step) if job.spec.options.compare else None
    if base is None:
        if step.compare.workers:  # nothing to compare with: still medians over rounds
            return compare_workers.alone(step, job, tree)
        return measure.plain(step, job, tree)
    result = None
    for way in preferred(step):
        result = way(step, job, tree, base)
        if result is not None:
            break
    if result is None:
        result = compare_processes.compare(step, job, tree, base)
    return _against(result, base)


def _against(result: BenchmarkResult, base: MergeBase | None) -> BenchmarkResult:
    """A comparison's result with each row judged and its merge base named; a run with no
    merge base (rounds alone, already judged) as it is."""
    if base is None:
        return result
    return stats.judged(result).model_copy(update={"merge_base": base.sha})


def preferred(step: Step) -> list[Comparison]:
    """The ways the step asks for, tried in order before separate processes."""
    if step.compare.argv:
        return [compare_in_process.compare]
    if step.compare.workers:
        return [compare_workers.compare]
    return []
