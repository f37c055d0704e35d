"""Before → after in one process: the pull request's harness loads the merge base's tree
beside its own and times both, row by row in rounds (the step's `compare.argv`, given
`{base}`). The quietest comparison, where the harness can do it."""

from __future__ import annotations

from runner.job.kinds.benchmark import comparison, measure
from runner.job.kinds.context import MergeBase, StepContext, Tree, step_result
from workflows.models import BenchmarkResult, StepStatus
from workflows.spec import Step

CANNOT = (2, 3)  # the harness has no `--baseline`, or cannot load the merge base's tree


def compare(step: Step, job: StepContext, tree: Tree, base: MergeBase) -> BenchmarkResult | None:
    """Both trees timed by the pull request's harness, recorded as the step; None where it
    cannot (exit 2 or 3: said in the log, and the rounds go to separate processes)."""
    together = step.model_copy(update={"argv": step.compare.argv})
    outcome, bench, why = measure.once(
        together, job, tree, step.name, job.artifacts, {"base": str(base.path)}
    )
    if outcome.exit_code in CANNOT:
        job.log(f"the harness cannot time both trees in one process (exit "
                f"{outcome.exit_code}): separate processes instead")  # fmt: skip
        return None
    if bench is None:
        measure.failed(job, step.name, outcome, why)
    rounds = comparison.rounds_of(bench.rows)
    message = f"with merge base {base.sha[:10]} in one process: {rounds} rounds"
    if not rounds:
        message = f"merge base {base.sha[:10]}: no row of it to compare"
    job.record(step_result(step.name, outcome, StepStatus.succeeded, message))
    return bench
