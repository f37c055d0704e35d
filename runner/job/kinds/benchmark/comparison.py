"""Before → after in separate processes: a benchmark run in each tree in turn, round after
round (ABBA: each round's order the reverse of the last, so a drift over the job cancels),
until every row's change is known within the target or another round would not fit in the
budget. For a harness that cannot load both trees itself (a foreign one, or an older tree).

`process_rounds` is the loop over two callables that each run one benchmark process and
return its rows (or None when it could not); `merged` pairs the runs by round into the
rows' samples, which `stats.judged` then reads. Where there is nothing to compare with (an
operator new in the pull request, `--no-compare`), `solo_rounds` and `merged_solo` still
give each row's latencies and its speedup against the reference as medians over rounds, so
the table does not move with one process's luck. `with_host_processes` adds, where a tree's
host time was timed in several processes, each process's median.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from runner.job.kinds.benchmark import stats
from workflows.models import BenchmarkResult, BenchmarkRow
from workflows.spec import Compare

Measure = Callable[[], BenchmarkResult | None]
RowKey = tuple[str, tuple[int, ...], tuple[int, ...] | None]
MIN_ROUNDS = 6  # stats: fewer bound no median at 95 %
# How far past its budget a comparison may run to reach MIN_ROUNDS: fewer rounds judge no row,
# so stopping a round short of them would waste every round already paid for.
REACH = 1.5


@dataclass(frozen=True)
class RoundsBudget:
    """How long a comparison's rounds may run, counted from their start: every round within
    `rounds_s`; short of MIN_ROUNDS, the rounds still missing within `reach_s`. `limit` is
    what set `rounds_s`, as the step's message says it."""

    rounds_s: float
    reach_s: float
    limit: str

    @classmethod
    def of(cls, compare: Compare, job_s: float = 0.0) -> RoundsBudget:
        """`compare.budget_s`, cut to what is left of `compare.verdict_s` (the job's time to
        its verdict) when the job has spent `job_s` before its rounds start. The cut takes
        only the rounds past the six a verdict needs: those may still reach REACH ×
        `budget_s`, since fewer judge no row and a verdict a little late beats none."""
        budget_s, verdict_s = compare.budget_s, compare.verdict_s
        reach_s = budget_s * REACH
        if verdict_s is None or verdict_s - job_s >= budget_s:
            return cls(budget_s, reach_s, f"budget of {budget_s:g} s")
        left = max(0.0, verdict_s - job_s)
        return cls(left, reach_s, f"the job's {verdict_s:g} s to its verdict")


def over_budget(elapsed_s: float, rounds: int, next_round_s: float, budget: RoundsBudget) -> str:
    """Why another round does not fit ("" when it does): within `budget.rounds_s`, or, short
    of MIN_ROUNDS, when the rounds still missing end within `budget.reach_s`. One round
    prices none of them: it holds the merge base's first run, which compiles (a worker's
    first round took 25 s where its next took 10 on a FlagGems operator)."""
    if elapsed_s + next_round_s <= budget.rounds_s:
        return ""
    if rounds >= MIN_ROUNDS:
        return budget.limit
    if rounds < 2:
        return ""
    reach_s = elapsed_s + (MIN_ROUNDS - rounds) * next_round_s
    if reach_s <= budget.reach_s:
        return ""
    return (
        f"{budget.limit}; the {MIN_ROUNDS} rounds a verdict needs would take about {reach_s:.0f} s"
    )


def row_key(row: BenchmarkRow) -> RowKey:
    out = tuple(row.output_size) if row.output_size is not None else None
    return row.dtype, tuple(row.size), out


@dataclass
class Runs:
    """The benchmark runs of each side, in the order taken; round i is after[i], before[i]."""

    after: list[BenchmarkResult] = field(default_factory=list)
    before: list[BenchmarkResult] = field(default_factory=list)
    stopped: str = ""  # why the rounds ended
    before_s: list[float] = field(default_factory=list)  # each merge base's run's seconds

    @property
    def rounds(self) -> int:
        return min(len(self.after), len(self.before))


def process_rounds(
    first_after: BenchmarkResult,
    measure_after: Measure,
    measure_before: Measure,
    *,
    budget: RoundsBudget,
    target: float,
    max_rounds: int,
    clock: Callable[[], float] = time.monotonic,
) -> Runs:
    """Runs of both sides in ABBA order, the pull request's first run given: after, before |
    before, after | after, before ... Stops once every row is settled (at least MIN_ROUNDS
    rounds), at `max_rounds`, when the next round would overrun `budget` (`over_budget`;
    a round is priced at twice the longer of the last two runs, so the merge base's first
    run, which compiles, does not price every round after it), or when a run fails (the
    rounds so far stand)."""
    runs = Runs(after=[first_after])
    started = clock()
    took: list[float] = []  # each run's seconds, in order
    order = ("before", "before", "after", "after")  # after the first run: B | B A | A B | …
    step = 0
    while True:
        if len(runs.after) == len(runs.before):  # a round ends here: another?
            if runs.rounds >= max_rounds:
                runs.stopped = f"{max_rounds} rounds"
                break
            if _all_settled(runs, target):
                runs.stopped = "every row settled"
                break
            next_round = 2 * max(took[-2:], default=0.0)
            why = over_budget(clock() - started, runs.rounds, next_round, budget)
            if why:
                runs.stopped = why
                break
        side = order[step % len(order)]
        begun = clock()
        result = (measure_before if side == "before" else measure_after)()
        took.append(clock() - begun)
        if side == "before":
            runs.before_s.append(took[-1])
        if result is None or not result.rows:
            which = "merge base" if side == "before" else "pull request"
            runs.stopped = f"a run of the {which} failed"
            break
        (runs.before if side == "before" else runs.after).append(result)
        step += 1
    return runs


def _all_settled(runs: Runs, target: float) -> bool:
    if runs.rounds < MIN_ROUNDS:
        return False
    return all(
        row.before_kernel_samples_ms is not None
        and stats.settled(row.before_kernel_samples_ms, row.kernel_samples_ms or [], target)
        for row in merged(runs).rows
    )


def merged(runs: Runs, mode: str = "processes") -> BenchmarkResult:
    """The pull request's first run with every row's per-round samples of both sides (rounds
    where either side lacks the row are left out of its pairs) and the medians as its
    latencies, its host times per call (each side's median over the rounds that have them, and
    per round over the rounds where both sides have them: a round whose readings could not be
    paired with its rows leaves out that round, not the row's host change) and its speedup
    against the reference as the median of the per-round speedups with that median's 95 %
    interval; rows the merge base never had keep their single run. `mode` is how the runs were
    taken (`compare_mode`)."""
    first = runs.after[0]
    rounds = runs.rounds
    after_rows = [_by_key(r) for r in runs.after[:rounds]]
    before_rows = [_by_key(r) for r in runs.before[:rounds]]
    rows = []
    for row in first.rows:
        key = row_key(row)
        pairs = [
            (a[key], b[key])
            for a, b in zip(after_rows, before_rows, strict=True)
            if key in a and key in b
        ]
        if not pairs:
            rows.append(row)
            continue
        reference = [a.reference_ms for a, _ in pairs]
        kernel = [a.kernel_ms for a, _ in pairs]
        before = [b.kernel_ms for _, b in pairs]
        before_reference = statistics.median(b.reference_ms for _, b in pairs)
        kernel_ms, before_ms = statistics.median(kernel), statistics.median(before)
        reference_ms = statistics.median(reference)
        speedups = stats.summarize([r / k for r, k in zip(reference, kernel, strict=True)])
        hosts = [
            (a.kernel_host_us, b.kernel_host_us)
            for a, b in pairs
            if a.kernel_host_us is not None and b.kernel_host_us is not None
        ]
        rows.append(
            row.model_copy(
                update={
                    "reference_ms": reference_ms,
                    "kernel_ms": kernel_ms,
                    "speedup": speedups.median,
                    "speedup_low": speedups.low,
                    "speedup_high": speedups.high,
                    "reference_host_us": _median([a.reference_host_us for a, _ in pairs]),
                    "kernel_host_us": _median([a.kernel_host_us for a, _ in pairs]),
                    "before_kernel_ms": before_ms,
                    "before_speedup": before_reference / before_ms,
                    "reference_samples_ms": reference,
                    "kernel_samples_ms": kernel,
                    "before_kernel_samples_ms": before,
                    "before_kernel_host_us": _median([b.kernel_host_us for _, b in pairs]),
                    "kernel_host_samples_us": [a for a, _ in hosts] or None,
                    "before_kernel_host_samples_us": [b for _, b in hosts] or None,
                }
            )
        )
    mean, geo = BenchmarkResult.means([r.speedup for r in rows])
    before_means = BenchmarkResult.means([r.before_speedup for r in rows if r.before_speedup])
    return first.model_copy(
        update={
            "rows": rows,
            "arithmetic_mean_speedup": mean,
            "geometric_mean_speedup": geo,
            "before_arithmetic_mean_speedup": before_means[0],
            "compare_mode": mode,
        }
    )


def with_host_processes(
    bench: BenchmarkResult,
    runs: Runs,
    after: Sequence[Mapping[RowKey, float]],
    before: Sequence[Mapping[RowKey, float]],
) -> BenchmarkResult:
    """A merged comparison with each row's host time per process (`kernel_host_process_us`,
    `before_kernel_host_process_us`): the worker's median over its rounds first, then each
    further process's (`after`, `before`: per process, each row's median, by row), where both
    sides then have at least two; other rows, and a comparison without further processes, as
    they were. `runs` are the workers' rounds the medians come from."""
    if not after or not before:
        return bench
    rows = []
    for row in bench.rows:
        key = row_key(row)
        own_after = _median(_host_of(runs.after, key))
        own_before = _median(_host_of(runs.before, key))
        ours = [v for v in [own_after, *(p.get(key) for p in after)] if v is not None]
        theirs = [v for v in [own_before, *(p.get(key) for p in before)] if v is not None]
        if len(ours) < 2 or len(theirs) < 2:
            rows.append(row)
            continue
        update = {"kernel_host_process_us": ours, "before_kernel_host_process_us": theirs}
        rows.append(row.model_copy(update=update))
    return bench.model_copy(update={"rows": rows})


def _host_of(results: Sequence[BenchmarkResult], key: RowKey) -> list[float | None]:
    """The row's kernel host time per call in each of a worker's rounds."""
    return [r.kernel_host_us for result in results for r in result.rows if row_key(r) == key]


def _median(values: Sequence[float | None]) -> float | None:
    """The median of the values present; None when none is."""
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def _by_key(result: BenchmarkResult) -> dict[RowKey, BenchmarkRow]:
    return {row_key(row): row for row in result.rows}


def describe(runs: Runs, elapsed_s: float, merge_base: str, how: str = "separate processes") -> str:
    """The comparison step's message: the rounds, why they stopped, and where their time went
    (the merge base's first run, which compiles and tunes, against its later ones)."""
    message = (
        f"merge base {merge_base[:10]}: {runs.rounds} rounds of {how} in "
        f"{elapsed_s:.0f} s ({runs.stopped})"
    )
    if len(runs.before_s) >= 2:
        first, low, high = runs.before_s[0], min(runs.before_s[1:]), max(runs.before_s[1:])
        spread = f"{low:.1f} s" if f"{low:.1f}" == f"{high:.1f}" else f"{low:.1f}–{high:.1f} s"
        message += f"; the merge base's first run {first:.1f} s, its later ones {spread}"
    return message


def rounds_of(rows: Sequence[BenchmarkRow]) -> int:
    """The most rounds any row was compared over."""
    compared = [len(r.kernel_samples_ms or ()) for r in rows if r.before_kernel_samples_ms]
    return max(compared, default=0)


def solo_rounds(
    first: BenchmarkResult,
    measure: Measure,
    *,
    budget: RoundsBudget,
    target: float,
    max_rounds: int,
    clock: Callable[[], float] = time.monotonic,
) -> Runs:
    """Rounds of the pull request alone, its first given: stops once every row's speedup is
    known within `target` either side (at least MIN_ROUNDS rounds), at `max_rounds`, when the
    next round, priced as the last one, would overrun `budget` (`over_budget`), or when a
    round fails (those so far stand)."""
    runs = Runs(after=[first])
    started = clock()
    last = 0.0
    while True:
        if len(runs.after) >= max_rounds:
            runs.stopped = f"{max_rounds} rounds"
            break
        if len(runs.after) >= MIN_ROUNDS and _speedups_settled(runs.after, target):
            runs.stopped = "every row settled"
            break
        why = over_budget(clock() - started, len(runs.after), last, budget)
        if why:
            runs.stopped = why
            break
        begun = clock()
        result = measure()
        last = clock() - begun
        if result is None or not result.rows:
            runs.stopped = "a round failed"
            break
        runs.after.append(result)
    return runs


def _speedup_samples(results: Sequence[BenchmarkResult]) -> dict[RowKey, list[float]]:
    samples: dict[RowKey, list[float]] = {}
    for result in results:
        for row in result.rows:
            if row.kernel_ms > 0:
                samples.setdefault(row_key(row), []).append(row.reference_ms / row.kernel_ms)
    return samples


def _speedups_settled(results: Sequence[BenchmarkResult], target: float) -> bool:
    for values in _speedup_samples(results).values():
        summary = stats.summarize(values)
        if summary.low is None or summary.high is None or summary.low <= 0:
            return False
        if summary.high / summary.low > ((1 + target) ** 2):
            return False
    return True


def merged_solo(runs: Runs, mode: str = "workers") -> BenchmarkResult:
    """The pull request's rounds alone as one result: each row's latencies and host times the
    medians over its rounds, its speedup the median of the per-round speedups with that
    median's 95 % interval (None under MIN_ROUNDS rounds)."""
    first = runs.after[0]
    by_round = [_by_key(r) for r in runs.after]
    rows = []
    for row in first.rows:
        key = row_key(row)
        seen = [r[key] for r in by_round if key in r and r[key].kernel_ms > 0]
        if len(seen) < 2:
            rows.append(row)
            continue
        reference = [r.reference_ms for r in seen]
        kernel = [r.kernel_ms for r in seen]
        speedups = stats.summarize([a / b for a, b in zip(reference, kernel, strict=True)])
        rows.append(
            row.model_copy(
                update={
                    "reference_ms": statistics.median(reference),
                    "kernel_ms": statistics.median(kernel),
                    "speedup": speedups.median,
                    "speedup_low": speedups.low,
                    "speedup_high": speedups.high,
                    "reference_host_us": _median([r.reference_host_us for r in seen]),
                    "kernel_host_us": _median([r.kernel_host_us for r in seen]),
                    "reference_samples_ms": reference,
                    "kernel_samples_ms": kernel,
                }
            )
        )
    mean, geo = BenchmarkResult.means([r.speedup for r in rows])
    return first.model_copy(
        update={
            "rows": rows,
            "arithmetic_mean_speedup": mean,
            "geometric_mean_speedup": geo,
            "compare_mode": mode,
        }
    )
