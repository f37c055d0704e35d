"""One run of a benchmark step and the rows it wrote: what the benchmark step and every way
of comparing it share (the step, this package's `__init__`, picks among the `compare_*`
modules, which use this)."""

from __future__ import annotations

from pathlib import Path
from typing import NoReturn

from runner.job import layouts
from runner.job.kinds.context import StepContext, Stop, Tree, interrupted, step_result
from runner.job.steps import StepOutcome
from runner.results import results
from workflows.models import BenchmarkResult, JobStatus, StepStatus
from workflows.spec import BenchmarkFormat, Step


def once(
    step: Step,
    job: StepContext,
    tree: Tree,
    name: str,
    artifacts: Path,
    extra: dict[str, str] | None = None,
) -> tuple[StepOutcome, BenchmarkResult | None, str | None]:
    """Run the benchmark in `tree`; (outcome, its rows or None, why not). A run that did not
    end by itself stops the job at `name`."""
    outcome, values = job.run(step, tree, artifacts, extra)
    interrupted(job, name, outcome, step.timeout_s)
    if outcome.exit_code != 0:
        return outcome, None, f"exited {outcome.exit_code}"
    where = step.results_path(values) or ""
    try:
        if step.format is BenchmarkFormat.flaggems:
            paths = sorted(tree.path.glob(where))
            if not paths:
                raise results.ResultsError(f"no benchmark records matching {where}")
            bench = layouts.read_flaggems_records(paths, job.spec.op)
        else:
            bench = results.read_benchmark(tree.path / where)
    except results.ResultsError as exc:
        return outcome, None, str(exc)
    return outcome, bench, None


def plain(step: Step, job: StepContext, tree: Tree) -> BenchmarkResult:
    """The pull request's benchmark run once, recorded as the step; a run with no result
    stops the job (`failed`)."""
    outcome, bench, why = once(step, job, tree, step.name, job.artifacts)
    if bench is None:
        failed(job, step.name, outcome, why)
    job.record(step_result(step.name, outcome, StepStatus.succeeded, None))
    return bench


def failed(job: StepContext, name: str, outcome: StepOutcome, why: str | None) -> NoReturn:
    """Stop the job at a benchmark of the pull request that gave no result: failed where
    the harness said a kernel was wrong (exit 1), errored otherwise."""
    verdict = StepStatus.failed if outcome.exit_code == 1 else StepStatus.errored
    message = f"benchmark {why}"
    job.record(step_result(name, outcome, verdict, message))
    end = JobStatus.failed if verdict is StepStatus.failed else JobStatus.errored
    raise Stop(end, name, message)


def clear_records(step: Step, tree: Path) -> None:
    """Remove a foreign harness's records of an earlier run in `tree` (they are globbed)."""
    if step.format is BenchmarkFormat.flaggems and step.results:
        for stale in tree.glob(step.results):
            stale.unlink(missing_ok=True)
