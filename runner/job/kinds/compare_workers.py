"""Before → after in a worker per tree (`runner.job.bench_workers`): both trees' benchmarks
started at once so their imports and collection overlap, kept alive, and asked for rounds in
turn (`runner.job.comparison.process_rounds`). For a foreign harness whose process is costly
and lands in a new state each time (`compare.workers`)."""

from __future__ import annotations

import shutil
from datetime import datetime

from runner.job import bench_workers, comparison
from runner.job.kinds import measure
from runner.job.kinds.context import (
    MergeBase,
    StepContext,
    Stop,
    Tree,
    base_side,
    base_step,
    now,
    succeeded,
)
from runner.job.sandboxing import give
from runner.job.steps import StepOutcome
from runner.plugins import PLUGINS
from runner.report import stats
from workflows.models import BenchmarkResult, JobStatus, Progress, StepResult, StepStatus
from workflows.spec import Step


def compare(step: Step, job: StepContext, tree: Tree, base: MergeBase) -> BenchmarkResult | None:
    """Rounds of both workers, merged; the pull request's worker in rounds alone where no round
    of the merge base comes (an operator new in the pull request: said as a skipped step);
    None where the merge base's environment
    cannot be made (the plain run then goes alone, as without a base). A pull request whose
    own worker gives no first round stops the job as a failed benchmark does."""
    name = base_step(step)
    before_tree = base_side(job, step, base)
    if before_tree is None:
        return None
    workers: list[bench_workers.Worker] = []
    started = now()
    job.on_progress(Progress(step=step.name))
    for side, side_tree in (("after", tree), ("base", before_tree)):
        workers.append(_start(step, job, side, side_tree))
    after, before = workers
    try:
        first = _first_round(step, job, after, workers, started, "in a worker per tree")
        runs = comparison.process_rounds(
            first,
            lambda: after.round(job.cancel),
            lambda: before.round(job.cancel),
            budget=comparison.RoundsBudget.of(step.compare, job.elapsed_s),
            target=step.compare.target,
            max_rounds=step.compare.max_rounds,
        )
        solo = first
        if not runs.rounds and not job.cancel.is_set():  # nothing to compare with: alone
            before.stop(job.grace_s)
            solo = _alone_rounds(step, job, after, first, started)
    finally:
        for worker in workers:
            worker.stop(job.grace_s)
    if job.cancel.is_set():
        raise Stop(JobStatus.cancelled, name, "cancelled")
    elapsed = (now() - started).total_seconds()
    pids = {w.name: sorted(w.pids) for w in workers}
    job.log(f"{name}: worker processes {pids}")
    failures = [f"{w.name} worker: {w.failure}" for w in workers if w.failure]
    if not runs.rounds:
        message = f"no benchmark of {job.spec.op} on the merge base {base.sha[:10]}"
        message += "".join(f"; {f}" for f in failures)
        job.record(StepResult(name=name, status=StepStatus.skipped, message=message))
        return solo
    message = comparison.describe(runs, elapsed, base.sha, "a worker per tree")
    message += "".join(f"; {f}" for f in failures)
    succeeded(job, name, elapsed, message)
    return comparison.merged(runs, mode="workers")


def alone(step: Step, job: StepContext, tree: Tree) -> BenchmarkResult:
    """No merge base to compare with (`--no-compare`, or none found): the pull request's
    worker alone, in rounds, so each row's latencies and speedup are medians over rounds with
    the speedup's 95 % interval, not one process's reading. A worker that gives no first round
    stops the job as a failed benchmark does."""
    started = now()
    job.on_progress(Progress(step=step.name))
    worker = _start(step, job, "after", tree)
    try:
        first = _first_round(step, job, worker, [worker], started, "in a worker, in rounds")
        result = _alone_rounds(step, job, worker, first, started)
    finally:
        worker.stop(job.grace_s)
    if job.cancel.is_set():
        raise Stop(JobStatus.cancelled, step.name, "cancelled")
    return result


def _start(step: Step, job: StepContext, side: str, tree: Tree) -> bench_workers.Worker:
    """Start `tree`'s worker (`side`: "after" or "base") with the rounds plugin loaded."""
    plugins = job.plugins
    plugins.mkdir(parents=True, exist_ok=True)
    plugin = f"{bench_workers.PLUGIN}.py"
    shutil.copyfile(PLUGINS / plugin, plugins / plugin)
    measure.clear_records(step, tree.path)
    requests, answers = bench_workers.prepare(job.job_dir, job.artifacts, side)
    give(answers, job.owner)
    worker = bench_workers.Worker(
        name=side, tree=tree.path, records=step.results or "", op=job.spec.op,
        requests=requests, answers=answers, log=job.log,
        first_timeout_s=float(step.timeout_s),
    )  # fmt: skip
    argv, _ = job.argv_for(step, tree, job.artifacts)
    job.log(f"step {step.name} ({side} worker): {' '.join(argv)}")
    plugged = bench_workers.worker_env(tree.env, plugins, requests, answers, step.timeout_s)
    worker.start(job.confined(argv), plugged, job.on_output, job.on_step_start)
    return worker


def _first_round(
    step: Step,
    job: StepContext,
    worker: bench_workers.Worker,
    workers: list[bench_workers.Worker],
    started: datetime,
    how: str,
) -> BenchmarkResult:
    """The pull request's first round, recorded as the step; none stops the job (every
    worker stopped first)."""
    first = worker.round(job.cancel)
    if first is None:
        for each in workers:
            each.stop(job.grace_s)
        if job.cancel.is_set():
            raise Stop(JobStatus.cancelled, step.name, "cancelled")
        outcome = worker.outcome or StepOutcome(None, 0.0)
        measure.failed(job, step.name, outcome, f"worker: {worker.failure}")
    job.record(
        StepResult(
            name=step.name, status=StepStatus.succeeded,
            duration_s=round((now() - started).total_seconds(), 3), message=how,
        )
    )  # fmt: skip
    return first


def _alone_rounds(
    step: Step,
    job: StepContext,
    worker: bench_workers.Worker,
    first: BenchmarkResult,
    started: datetime,
) -> BenchmarkResult:
    """More rounds of the pull request's worker alone, merged into medians (a step line)."""
    runs = comparison.solo_rounds(
        first,
        lambda: worker.round(job.cancel),
        budget=comparison.RoundsBudget.of(step.compare, job.elapsed_s),
        target=step.compare.target,
        max_rounds=step.compare.max_rounds,
    )
    elapsed = (now() - started).total_seconds()
    message = f"{len(runs.after)} rounds alone in {elapsed:.0f} s ({runs.stopped})"
    if worker.failure:
        message += f"; {worker.failure}"
    succeeded(job, f"{step.name} (rounds)", elapsed, message)
    return stats.judged(comparison.merged_solo(runs))
