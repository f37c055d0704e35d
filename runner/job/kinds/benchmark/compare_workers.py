"""Before → after in a worker per tree (`bench_workers`): both trees' benchmarks
started at once so their imports and collection overlap, kept alive, and asked for rounds in
turn (`comparison.process_rounds`). For a foreign harness whose process is costly
and lands in a new state each time (`compare.workers`).

Where steps run before the benchmark (the accuracy tests), the job starts the workers ahead
(`head_start`), so their start, tens of seconds on a large harness, passes while those steps
run; no round is asked for before the step begins, so no timing shares the device with them.

A host-bound row's host time is judged with processes as samples: beside each tree's worker,
`compare.host_processes − 1` further processes of the same step start with it (ahead too),
wait through the rounds, and once the workers are done (stopped: their records read) each
times `compare.host_rounds` rounds, the trees' processes in turn (ABBA), within
`compare.host_budget_s`, which the rounds' time to the verdict keeps for them. Each process's
median host time per call of a row is one sample (`comparison.with_host_processes`); none
run where no row is host-bound. The device time is the workers' alone, as without them.
"""

from __future__ import annotations

import shutil
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from report.verdicts import host_bound_row
from runner.job.kinds.benchmark import bench_workers, comparison, measure, stats
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
    # The further host processes, by pair: (the pull request's, the merge base's) for
    # processes 2, 3, ... of each tree (`compare.host_processes`).
    hosts: list[tuple[bench_workers.Worker, bench_workers.Worker]] = field(default_factory=list)

    @property
    def workers(self) -> list[bench_workers.Worker]:
        return [w for w in (self.after, self.before) if w is not None]

    @property
    def host_workers(self) -> list[bench_workers.Worker]:
        return [w for pair in self.hosts for w in pair]

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
        for worker in [*self.workers, *self.host_workers]:
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

    def start(side: str, side_tree: Tree, host: bool = False) -> bench_workers.Worker:
        sink = HeldOutput(job.on_output)
        held.append(sink)
        idle_s = wait_s + step.timeout_s
        return _start(step, job, side, side_tree, sink, idle_s=idle_s, host=host)

    after = start("after", tree)
    if before_tree is None or base is None:
        return Started(after, held=held)
    started = Started(after, start("base", before_tree), base, held=held)
    started.hosts = _start_hosts(step, tree, before_tree, start)
    return started


def _start_hosts(
    step: Step,
    tree: Tree,
    before_tree: Tree,
    start: Callable[[str, Tree, bool], bench_workers.Worker],
) -> list[tuple[bench_workers.Worker, bench_workers.Worker]]:
    """The further host processes of both trees, by pair (`compare.host_processes`)."""
    return [
        (start(f"after-{k}", tree, True), start(f"base-{k}", before_tree, True))
        for k in range(2, step.compare.host_processes + 1)
    ]


def compare(step: Step, job: StepContext, tree: Tree, base: MergeBase) -> BenchmarkResult | None:
    """Rounds of both workers, merged; None where the merge base's environment cannot be made
    (the plain run then goes alone, as without a base)."""
    before_tree = base_side(job, step, base)
    if before_tree is None:
        return None
    after = _start(step, job, "after", tree, job.on_output)
    before = _start(step, job, "base", before_tree, job.on_output)
    started = Started(after, before, base)

    def start(side: str, side_tree: Tree, host: bool = False) -> bench_workers.Worker:
        return _start(step, job, side, side_tree, job.on_output, host=host)

    started.hosts = _start_hosts(step, tree, before_tree, start)
    return rounds(step, job, started)


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
    hosts = HostRuns()
    try:
        _hosts_ready(step, job, started)
        first = _first_round(step, job, after, started.workers, begun, "in a worker per tree")
        reserve_s = step.compare.host_budget_s if started.hosts else 0.0
        runs = comparison.process_rounds(
            first,
            lambda: after.round(job.cancel),
            lambda: before.round(job.cancel),
            budget=comparison.RoundsBudget.of(step.compare, job.elapsed_s + reserve_s),
            target=step.compare.target,
            max_rounds=step.compare.max_rounds,
        )
        solo = first
        if not runs.rounds and not job.cancel.is_set():  # nothing to compare with: alone
            before.stop(job.grace_s)
            solo = _alone_rounds(step, job, after, first, begun)
        elif started.hosts and not job.cancel.is_set():
            hosts = _host_runs(step, job, started, runs)
    finally:
        started.stop(job.grace_s)
    if job.cancel.is_set():
        raise Stop(JobStatus.cancelled, name, "cancelled")
    elapsed = (now() - begun).total_seconds()
    pids = {w.name: sorted(w.pids) for w in [*started.workers, *started.host_workers] if w.pids}
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
    if hosts.said:
        message += f"; {hosts.said}"
    succeeded(job, name, elapsed, message)
    merged = comparison.merged(runs, mode="workers")
    return comparison.with_host_processes(merged, runs, hosts.after, hosts.before)


@dataclass
class HostRuns:
    """What the further host processes gave: per process, each row's median host time per
    call of the kernel (µs), by row; and the step message's words on them."""

    after: list[dict[comparison.RowKey, float]] = field(default_factory=list)
    before: list[dict[comparison.RowKey, float]] = field(default_factory=list)
    said: str = ""


def _hosts_ready(step: Step, job: StepContext, started: Started) -> None:
    """Wait for the further host processes to collect before the worker's first round (their
    harness opens the worker's record files); one that does not in the step's timeout is
    stopped and left out, its pair with it."""
    if not started.hosts:
        return
    late = bench_workers.wait_ready(started.host_workers, job.cancel, float(step.timeout_s))
    for pair in [p for p in started.hosts if any(w in late for w in p)]:
        for worker in pair:
            worker.stop(job.grace_s)
        started.hosts.remove(pair)
        job.log(f"step {step.name}: host processes {pair[0].name}, {pair[1].name} left out")


def _host_runs(step: Step, job: StepContext, started: Started, runs: comparison.Runs) -> HostRuns:
    """The further host processes' rounds, once the workers are done (stopped first, their
    records read, their device and memory freed): pair by pair, the trees in turn (ABBA),
    `compare.host_rounds` rounds each, within `compare.host_budget_s` (a pair starts only
    where twice the longest process so far fits); each process stopped after its rounds.
    None run where no row is host-bound."""
    found = HostRuns()
    merged = comparison.merged(runs, mode="workers")
    if not any(host_bound_row(row) for row in merged.rows):
        found.said = "no row host-bound: no further host process timed"
        return found
    for worker in started.workers:
        worker.stop(job.grace_s)
    keys = {
        "after": [comparison.row_key(r) for r in runs.after[-1].rows],
        "base": [comparison.row_key(r) for r in runs.before[-1].rows],
    }
    budget_s, begun, longest = step.compare.host_budget_s, time.monotonic(), 0.0
    failed: list[str] = []
    stopped = ""
    for index, pair in enumerate(started.hosts):
        spent = time.monotonic() - begun
        if index and spent + 2 * longest > budget_s:
            stopped = f"the host budget of {budget_s:g} s"
            break
        for worker in pair if index % 2 == 0 else pair[::-1]:
            took = time.monotonic()
            side = "after" if worker.name.startswith("after") else "base"
            samples = _host_samples(worker, job, keys[side], step.compare.host_rounds)
            worker.stop(job.grace_s)
            longest = max(longest, time.monotonic() - took)
            if samples is None:
                failed.append(f"{worker.name}: {worker.failure}")
                continue
            (found.after if side == "after" else found.before).append(samples)
        if job.cancel.is_set():
            return found
    spent = time.monotonic() - begun
    counts = f"{len(found.after) + 1} and {len(found.before) + 1}"
    found.said = f"host time in {counts} processes per tree ({spent:.0f} s"
    found.said += f", stopped at {stopped})" if stopped else ")"
    found.said += "".join(f"; host process {f}" for f in failed)
    return found


def _host_samples(
    worker: bench_workers.Worker, job: StepContext, keys: list[comparison.RowKey], rounds: int
) -> dict[comparison.RowKey, float] | None:
    """A further host process's rounds: each row's median kernel host time per call (µs)
    over them; None where a round failed."""
    per_round = []
    for _ in range(rounds):
        times = worker.host_round(job.cancel, len(keys))
        if times is None:
            return None
        per_round.append(times)
    return {key: statistics.median(r[i] for r in per_round) for i, key in enumerate(keys)}


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
    host: bool = False,
) -> bench_workers.Worker:
    """Start `tree`'s worker (`side`: "after" or "base"; a further host process's
    "after-2", "base-2", ... with `host`) with the rounds plugin loaded; it waits for its
    first round `idle_s` at most (the step's timeout by default). A host process clears no
    records (its worker's, started beside it) and waits for a round at most twice the host
    budget (a minute at least)."""
    plugins = job.plugins
    plugins.mkdir(parents=True, exist_ok=True)
    plugin = f"{bench_workers.PLUGIN}.py"
    shutil.copyfile(PLUGINS / plugin, plugins / plugin)
    if not host:
        measure.clear_records(step, tree.path)
    requests, answers = bench_workers.prepare(job.job_dir, job.artifacts, side)
    give(answers, job.owner)
    first_s = max(60.0, 2 * step.compare.host_budget_s) if host else float(step.timeout_s)
    worker = bench_workers.Worker(
        name=side, tree=tree.path, records=step.results or "", op=job.spec.op,
        requests=requests, answers=answers, log=job.log, first_timeout_s=first_s,
    )  # fmt: skip
    argv, _ = job.argv_for(step, tree, job.artifacts)
    job.log(f"step {step.name} ({side} worker): {' '.join(argv)}")
    idle = step.timeout_s if idle_s is None else idle_s
    poll_s = bench_workers.HOST_POLL_S if host else None
    plugged = bench_workers.worker_env(tree.env, plugins, requests, answers, idle, poll_s)
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
