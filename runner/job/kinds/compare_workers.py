"""Before → after in a worker per tree (`runner.job.bench_workers`): both trees' benchmarks
started at once so their imports and collection overlap, kept alive, and asked for rounds in
turn (`runner.job.comparison.process_rounds`). For a foreign harness whose process is costly
and lands in a new state each time (`compare.workers`).

Where steps run before the benchmark (the accuracy tests), the job starts the workers ahead
(`head_start`), so their start, tens of seconds on a large harness, passes while those steps
run; no round is asked for before the step begins, so no timing shares the device with them.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
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
from runner.job.steps import HeldOutput, StepOutcome
from runner.plugins import PLUGINS
from runner.report import stats
from workflows.models import BenchmarkResult, JobStatus, Progress, StepResult, StepStatus
from workflows.spec import Step


@dataclass
class Started:
    """A step's workers once started: the pull request's, and the merge base's where the job
    compares with one (`base`). Their output is held until the step begins (`begin`)."""

    after: bench_workers.Worker
    before: bench_workers.Worker | None = None
    base: MergeBase | None = None
    held: list[HeldOutput] = field(default_factory=list)
    ahead_s: float = 0.0  # how long before the step they started (0: at its start)
    at: datetime = field(default_factory=now)

    @property
    def workers(self) -> list[bench_workers.Worker]:
        return [w for w in (self.after, self.before) if w is not None]

    def begin(self, job: StepContext, step: Step) -> datetime:
        """The step begins: the held output goes to the log, the step is shown as current,
        and when it began is returned (its rounds' time counts from there)."""
        begun = now()
        if self.held:
            self.ahead_s = (begun - self.at).total_seconds()
            job.log(f"step {step.name}: workers started {self.ahead_s:.1f} s ahead")
        for held in self.held:
            held.release()
        job.on_progress(Progress(step=step.name))
        return begun

    def stop(self, grace_s: float) -> None:
        for worker in self.workers:
            worker.stop(grace_s)


def head_start(step: Step, job: StepContext, tree: Tree, wait_s: float) -> Started | None:
    """Start the step's workers now, ahead of it: the steps before it take up to `wait_s`.
    None where the step will not run them (`--no-bench`, or no `compare.workers`); the pull
    request's worker alone where the job has no merge base or its environment cannot be made
    (said as a skipped step, as without a head start)."""
    if not job.spec.options.bench or not step.compare.workers:
        return None
    base = job.base_tree(step) if job.spec.options.compare else None
    before_tree = base_side(job, step, base) if base is not None else None
    held: list[HeldOutput] = []

    def start(side: str, side_tree: Tree) -> bench_workers.Worker:
        sink = HeldOutput(job.on_output)
        held.append(sink)
        return _start(step, job, side, side_tree, sink, idle_s=wait_s + step.timeout_s)

    after = start("after", tree)
    if before_tree is None or base is None:
        return Started(after, held=held)
    return Started(after, start("base", before_tree), base, held=held)


def compare(step: Step, job: StepContext, tree: Tree, base: MergeBase) -> BenchmarkResult | None:
    """Rounds of both workers, merged; None where the merge base's environment cannot be made
    (the plain run then goes alone, as without a base)."""
    before_tree = base_side(job, step, base)
    if before_tree is None:
        return None
    after = _start(step, job, "after", tree, job.on_output)
    before = _start(step, job, "base", before_tree, job.on_output)
    return rounds(step, job, Started(after, before, base))


def rounds(step: Step, job: StepContext, started: Started) -> BenchmarkResult:
    """The step's rounds on workers already started: both trees' rounds merged (not yet
    judged); the pull request's worker in rounds alone, judged, where there is no merge base
    or it gives no round (an operator new in the pull request: said as a skipped step). A
    pull request whose own worker gives no first round stops the job as a failed benchmark
    does."""
    begun = started.begin(job, step)
    if started.before is None or started.base is None:
        try:
            how = "in a worker, in rounds"
            first = _first_round(step, job, started.after, started.workers, begun, how)
            result = _alone_rounds(step, job, started.after, first, begun)
        finally:
            started.stop(job.grace_s)
        if job.cancel.is_set():
            raise Stop(JobStatus.cancelled, step.name, "cancelled")
        return result
    return _compared_rounds(step, job, started, started.before, started.base, begun)


def _compared_rounds(
    step: Step,
    job: StepContext,
    started: Started,
    before: bench_workers.Worker,
    base: MergeBase,
    begun: datetime,
) -> BenchmarkResult:
    """Both workers' rounds in turn, merged; the pull request's alone where the merge base's
    gives none (a skipped step says why)."""
    name, after = base_step(step), started.after
    try:
        first = _first_round(step, job, after, started.workers, begun, "in a worker per tree")
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
            solo = _alone_rounds(step, job, after, first, begun)
    finally:
        started.stop(job.grace_s)
    if job.cancel.is_set():
        raise Stop(JobStatus.cancelled, name, "cancelled")
    elapsed = (now() - begun).total_seconds()
    pids = {w.name: sorted(w.pids) for w in started.workers}
    job.log(f"{name}: worker processes {pids}")
    failures = [f"{w.name} worker: {w.failure}" for w in started.workers if w.failure]
    if not runs.rounds:
        message = f"no benchmark of {job.spec.op} on the merge base {base.sha[:10]}"
        message += "".join(f"; {f}" for f in failures)
        job.record(StepResult(name=name, status=StepStatus.skipped, message=message))
        return solo
    message = comparison.describe(runs, elapsed, base.sha, "a worker per tree")
    message += "".join(f"; {f}" for f in failures)
    if started.ahead_s:
        message += f"; started {started.ahead_s:.0f} s ahead, during the steps before"
    succeeded(job, name, elapsed, message)
    return comparison.merged(runs, mode="workers")


def alone(step: Step, job: StepContext, tree: Tree) -> BenchmarkResult:
    """No merge base to compare with (`--no-compare`, or none found): the pull request's
    worker alone, in rounds, so each row's latencies and speedup are medians over rounds with
    the speedup's 95 % interval, not one process's reading. A worker that gives no first round
    stops the job as a failed benchmark does."""
    return rounds(step, job, Started(_start(step, job, "after", tree, job.on_output)))


def _start(
    step: Step,
    job: StepContext,
    side: str,
    tree: Tree,
    on_output: Callable[[bytes], None],
    idle_s: float | None = None,
) -> bench_workers.Worker:
    """Start `tree`'s worker (`side`: "after" or "base") with the rounds plugin loaded; it
    waits for its first round `idle_s` at most (the step's timeout by default)."""
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
    idle = step.timeout_s if idle_s is None else idle_s
    plugged = bench_workers.worker_env(tree.env, plugins, requests, answers, idle)
    worker.start(job.confined(argv), plugged, on_output, job.on_step_start)
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
