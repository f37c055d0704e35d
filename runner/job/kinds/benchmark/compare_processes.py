"""Before → after in separate processes: the pull request's benchmark run as the step, then
runs of each tree in turn, round after round in ABBA order (`comparison`), merged
into per-round samples. For a harness that cannot load both trees itself; the way every
other comparison falls back to, so it always gives a result."""

from __future__ import annotations

from runner.job.kinds.benchmark import comparison, measure
from runner.job.kinds.context import (
    MergeBase,
    StepContext,
    Tree,
    base_side,
    base_step,
    now,
    step_result,
    succeeded,
)
from runner.job.steps import StepOutcome
from workflows.models import BenchmarkResult, StepResult, StepStatus
from workflows.spec import Step


def compare(step: Step, job: StepContext, tree: Tree, base: MergeBase) -> BenchmarkResult:
    """The plain run (a failure stops the job), then the rounds; the plain run alone where
    the merge base's environment cannot be made or none of its runs gives rows (said as a
    skipped step)."""
    first = measure.plain(step, job, tree)
    name = base_step(step)
    started = now()
    before = base_side(job, step, base)
    if before is None:
        return first
    artifacts = job.artifacts
    last: list[StepOutcome] = []

    def measure_in(side: Tree, where: str) -> comparison.Measure:
        def run() -> BenchmarkResult | None:
            measure.clear_records(step, side.path)
            outcome, bench, why = measure.once(step, job, side, name, artifacts / where)
            last.append(outcome)
            if bench is None:
                job.log(f"{name}: a run in {where} gave no rows ({why})")
            return bench

        return run

    runs = comparison.process_rounds(
        first,
        measure_in(tree, "after"),
        measure_in(before, "base"),
        budget=comparison.RoundsBudget.of(step.compare, job.elapsed_s),
        target=step.compare.target,
        max_rounds=step.compare.max_rounds,
    )
    elapsed = (now() - started).total_seconds()
    if not runs.rounds:
        message = f"no benchmark of {job.spec.op} on the merge base {base.sha[:10]}"
        outcome = last[-1] if last else None
        job.record(
            step_result(name, outcome, StepStatus.skipped, message)
            if outcome is not None
            else StepResult(name=name, status=StepStatus.skipped, message=message)
        )
        return first
    message = comparison.describe(runs, elapsed, base.sha)
    succeeded(job, name, elapsed, message)
    return comparison.merged(runs)
