"""The comparison's statistics on samples with known answers: no change, a 20 % shift, a
bimodal row, too few rounds; and the rounds of separate processes (ABBA, budget, stop)."""

from __future__ import annotations

import numpy as np
import pytest

from report.verdicts import Verdict, detectable, judge, noise_band
from runner.job.kinds.benchmark import comparison, stats
from workflows.models import BenchmarkResult, BenchmarkRow
from workflows.spec import Compare

RNG = np.random.default_rng(20261203)


def _noisy(center: float, n: int, spread: float = 0.01) -> list[float]:
    return (center * np.exp(RNG.normal(0, spread, n))).tolist()


def test_no_change_is_same_and_its_interval_holds_one() -> None:
    before, after = _noisy(0.05, 20), _noisy(0.05, 20)
    change = stats.change(before, after)
    assert change is not None and change.rounds == 20
    assert change.low is not None and change.high is not None
    assert change.low < 1 < change.high
    assert judge(change, 0.10) is Verdict.same


def test_a_twenty_percent_slowdown_is_slower_and_its_interval_excludes_the_threshold() -> None:
    before, after = _noisy(0.05, 12), _noisy(0.06, 12)
    change = stats.change(before, after)
    assert change is not None and 1.15 < change.ratio < 1.25
    assert change.low is not None and change.low > 1.10
    assert judge(change, 0.10) is Verdict.slower
    faster = stats.change(after, before)
    assert faster is not None and judge(faster, 0.10) is Verdict.faster
    # The smallest slowdown it could flag: the threshold and its band.
    band = noise_band(change)
    assert band is not None and detectable(change, 0.10) == pytest.approx(1.1 * (1 + band) - 1)


def test_a_bimodal_row_is_too_noisy_to_judge() -> None:
    # A process's state: each side's latency is 0.13 or 0.33 ms by chance, round by round.
    states = RNG.integers(0, 2, size=(2, 10))
    before = [0.13 if s else 0.33 for s in states[0]]
    after = [0.13 if s else 0.33 for s in states[1]]
    change = stats.change(before, after)
    assert change is not None
    band = noise_band(change)
    assert band is None or band > 0.10
    assert judge(change, 0.10) is Verdict.noisy


def test_fewer_than_six_rounds_bound_nothing() -> None:
    change = stats.change([1.0] * 5, [1.5] * 5)  # every round says +50 %: still not enough
    assert change is not None and change.low is None and change.high is None
    assert judge(change, 0.10) is Verdict.noisy
    six = stats.change([1.0] * 6, [1.5] * 6)
    assert six is not None and six.low == pytest.approx(1.5) and judge(six, 0.10) is Verdict.slower
    summary = stats.summarize([2.0, 1.0, 3.0])
    assert (summary.rounds, summary.median, summary.low) == (3, 2.0, None)


def test_rounds_are_paired_by_index_and_unpaired_tails_dropped() -> None:
    change = stats.change([1.0, 2.0, 4.0, 1.0, 2.0, 4.0, 9.0], [1.1, 2.2, 4.4, 1.1, 2.2, 4.4])
    assert change is not None and change.rounds == 6
    assert change.ratio == pytest.approx(1.1) and change.low == pytest.approx(1.1)
    assert stats.change([], [1.0]) is None


def _row(kernel: float, reference: float = 1.0, dtype: str = "float16") -> BenchmarkRow:
    return BenchmarkRow(
        dtype=dtype, size=[1, 2], output_size=[1], reference_ms=reference, kernel_ms=kernel,
        speedup=reference / kernel,
    )  # fmt: skip


def _run(kernels: dict[str, float]) -> BenchmarkResult:
    return BenchmarkResult(op="op", rows=[_row(k, dtype=d) for d, k in kernels.items()])


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_process_rounds_alternate_abba_and_stop_once_every_row_is_settled() -> None:
    clock = Clock()
    order: list[str] = []

    def measure(side: str, kernel: float) -> comparison.Measure:
        def run() -> BenchmarkResult:
            order.append(side)
            clock.now += 1
            return _run({"float16": kernel, "float32": kernel * 2})

        return run

    runs = comparison.process_rounds(
        _run({"float16": 1.2, "float32": 2.4}),
        measure("A", 1.2),
        measure("B", 1.0),
        budget=_budget(1000),
        target=0.025,
        max_rounds=20,
        clock=clock,
    )
    assert "".join(order[:7]) == "BBAABBA"  # after the given first A: B | B A | A B | B A
    assert runs.rounds == comparison.MIN_ROUNDS and runs.stopped == "every row settled"
    merged = stats.judged(comparison.merged(runs))
    assert merged.compare_mode == "processes"
    row = merged.rows[0]
    assert row.kernel_samples_ms == [1.2] * 6 and row.before_kernel_samples_ms == [1.0] * 6
    assert row.change is not None and row.change.ratio == pytest.approx(1.2)
    assert judge(row.change, 0.10) is Verdict.slower
    assert merged.geometric_mean_rounds is not None
    assert merged.geometric_mean_rounds.median == pytest.approx((1 / 1.2 + 1 / 2.4) / 2, rel=0.2)


def test_process_rounds_keep_to_the_budget_and_stop_on_a_failed_run() -> None:
    clock = Clock()

    def slow(kernel: float) -> comparison.Measure:
        def run() -> BenchmarkResult:
            clock.now += 30  # a FlagGems process: half a minute
            return _run({"float16": kernel})

        return run

    runs = comparison.process_rounds(
        _run({"float16": 1.0}), slow(1.0), slow(1.0), budget=_budget(100), target=0.025,
        max_rounds=20, clock=clock,
    )  # fmt: skip
    # B | B A, then 90 + 60 > 100, and six rounds would end at 90 + 4 × 60 = 330 > 1.5 × 100
    assert runs.rounds == 2 and runs.stopped.startswith("budget of 100 s")
    assert "the 6 rounds a verdict needs would take about 330 s" in runs.stopped
    assert clock.now == 90
    failing = comparison.process_rounds(
        _run({"float16": 1.0}), lambda: None, slow(1.0), budget=_budget(1000), target=0.025,
        max_rounds=20, clock=clock,
    )  # fmt: skip
    assert failing.rounds == 1 and "pull request failed" in failing.stopped
    only_head = stats.judged(comparison.merged(failing))
    assert only_head.rows[0].change is not None and only_head.rows[0].change.rounds == 1


def test_process_rounds_reach_the_rounds_a_verdict_needs_past_a_tight_budget() -> None:
    """A host-bound FlagGems operator on an H100: a worker's round of 9 s a side, the merge
    base's first 20 s (it compiles). Priced by that first run, or stopped at the budget short
    of six rounds, the job judged no row; now the first run prices only the round after it,
    and the sixth round runs past the budget (by less than half of it)."""
    clock = Clock()

    def side(first_s: float) -> comparison.Measure:
        runs = []

        def run() -> BenchmarkResult:
            clock.now += first_s if not runs else 8.0
            runs.append(clock.now)
            return _run({"float16": 1.0 + 0.3 * (len(runs) % 3)})  # never settled

        return run

    runs = comparison.process_rounds(
        _run({"float16": 1.0}), side(8.0), side(20.0), budget=_budget(90), target=0.001,
        max_rounds=20, clock=clock,
    )  # fmt: skip
    assert runs.rounds == comparison.MIN_ROUNDS and runs.stopped == "budget of 90 s"
    assert clock.now == 100  # 84 s after five rounds, the sixth to 100 (≤ 1.5 × 90)
    assert stats.judged(comparison.merged(runs)).rows[0].change.low is not None  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("elapsed", "rounds", "next_round", "stop"),
    [
        (70, 2, 10, ""),  # fits the budget
        (84, 5, 16, ""),  # past the budget, the sixth round ends at 100 ≤ 135
        (84, 6, 16, "budget of 90 s"),  # six rounds in: the budget holds
        (80, 2, 20, "budget of 90 s; the 6 rounds a verdict needs would take about 160 s"),
    ],
)
def test_over_budget_lets_a_comparison_reach_six_rounds_within_half_its_budget_again(
    elapsed: float, rounds: int, next_round: float, stop: str
) -> None:
    assert comparison.over_budget(elapsed, rounds, next_round, _budget(90)) == stop


def _budget(
    budget_s: float, verdict_s: float | None = None, job_s: float = 0.0
) -> comparison.RoundsBudget:
    return comparison.RoundsBudget.of(Compare(budget_s=budget_s, verdict_s=verdict_s), job_s)


def test_the_job_time_to_its_verdict_cuts_the_rounds_past_six_not_the_six() -> None:
    """A full FlagGems job on an H100: accuracy and the workers' start took 85 s of the 140 s
    the layout aims the verdict at, so the rounds get 55 s of their 90 s budget; rounds of
    10 s stop at the six a verdict needs (60 s, past the 55 s but within 1.5 × 90), not at
    the nine the whole budget held. On the H100 the merge base's first run (it compiles)
    took 25 s and, priced by it alone, the rounds stopped at one and judged no row."""
    assert _budget(90, 140, job_s=40) == comparison.RoundsBudget(90, 135, "budget of 90 s")
    assert _budget(90, None, job_s=500).rounds_s == 90  # no verdict_s: the budget alone
    cut = _budget(90, 140, job_s=85)
    assert (cut.rounds_s, cut.reach_s) == (55, 135)
    assert _budget(90, 140, job_s=200).rounds_s == 0  # spent: the six rounds only
    clock = Clock()

    def run() -> BenchmarkResult:
        clock.now += 5.0
        return _run({"float16": 1.0 + 0.3 * (clock.now % 15 / 5)})  # never settled

    runs = comparison.process_rounds(
        _run({"float16": 1.0}), run, run, budget=cut, target=0.001, max_rounds=20, clock=clock
    )
    assert runs.rounds == comparison.MIN_ROUNDS
    assert runs.stopped == "the job's 140 s to its verdict"
    whole = comparison.process_rounds(
        _run({"float16": 1.0}), run, run, budget=_budget(90), target=0.001, max_rounds=20,
        clock=clock,
    )  # fmt: skip
    assert whole.rounds == 9 and whole.stopped == "budget of 90 s"
    late = comparison.process_rounds(
        _run({"float16": 1.0}), run, run, budget=_budget(90, 140, job_s=200), target=0.001,
        max_rounds=20, clock=clock,
    )  # fmt: skip
    assert late.rounds == comparison.MIN_ROUNDS
    compiles = [25.0]  # the merge base's first run, then 5 s a run as above

    def base() -> BenchmarkResult:
        clock.now += compiles.pop() - 5.0 if compiles else 0.0
        return run()

    start = clock.now
    measured = comparison.process_rounds(
        _run({"float16": 1.0}), run, base, budget=cut, target=0.001, max_rounds=20,
        clock=clock,
    )  # fmt: skip
    assert measured.rounds == comparison.MIN_ROUNDS, measured.stopped
    assert clock.now - start == 25 + 5 * 10  # 75 s: the six rounds, within 1.5 × 90
    # The step's message says where the time went: the first run against the later ones.
    assert measured.before_s == [25.0] + [5.0] * 5
    said = comparison.describe(measured, 75.0, "e80d240eb1ffff", "a worker per tree")
    assert said == (
        f"merge base e80d240eb1: 6 rounds of a worker per tree in 75 s ({measured.stopped})"
        "; the merge base's first run 25.0 s, its later ones 5.0 s"
    )


def test_solo_rounds_reach_six_rounds_past_a_tight_budget() -> None:
    clock = Clock()

    def run() -> BenchmarkResult:
        clock.now += 10
        return _run({"float16": 1.0 + 0.3 * (clock.now % 30 / 10)})  # never settled

    runs = comparison.solo_rounds(
        _run({"float16": 1.0}), run, budget=_budget(45), target=0.0001, max_rounds=20, clock=clock
    )
    assert len(runs.after) == comparison.MIN_ROUNDS and runs.stopped == "budget of 45 s"
    assert clock.now == 50  # five more rounds: the last ends 5 s past the budget


def test_a_change_the_harness_wrote_is_not_taken_on_trust() -> None:
    # A pull request's harness writes a row that claims no change, with samples that say +50 %.
    claimed = _row(1.5).model_copy(
        update={
            "change": stats.Change(rounds=50, ratio=1.0, low=0.99, high=1.01),
            "kernel_samples_ms": [1.5] * 8,
            "before_kernel_samples_ms": [1.0] * 8,
        }
    )
    bare = _row(1.5).model_copy(
        update={"change": stats.Change(rounds=50, ratio=1.0, low=0.99, high=1.01)}
    )
    rows = stats.judged(BenchmarkResult(op="op", rows=[claimed, bare])).rows
    assert rows[0].change is not None and rows[0].change.ratio == pytest.approx(1.5)
    assert rows[1].change is None


def test_rounds_with_host_readings_give_the_row_its_host_change() -> None:
    """Where every round also read the kernel's host time per call, `judged` gives the row the
    change of its host time (after over before, paired by round) beside its device time's."""
    row = BenchmarkRow(
        dtype="float16", size=[1, 1, 8, 8, 8], reference_ms=0.007, kernel_ms=0.012,
        speedup=0.58, kernel_samples_ms=[0.012] * 8, before_kernel_samples_ms=[0.012] * 8,
        kernel_host_samples_us=[61.0, 62.0, 60.0, 61.5] * 2,
        before_kernel_host_samples_us=[50.0, 50.5, 49.5, 50.0] * 2,
    )  # fmt: skip
    judged_row = stats.judged(BenchmarkResult(op="op", rows=[row])).rows[0]
    host = judged_row.host_change
    assert host is not None and host.rounds == 8 and 1.2 < host.ratio < 1.25
    assert judged_row.change is not None and judged_row.change.ratio == 1.0
    plain = stats.judged(BenchmarkResult(op="op", rows=[row.model_copy(
        update={"kernel_host_samples_us": None})]))  # fmt: skip
    assert plain.rows[0].host_change is None


def test_a_round_without_host_readings_leaves_out_that_round_not_the_host_change() -> None:
    """A worker's first round whose timer readings could not be paired with its rows (an
    autotuner's readings among them) has no host times: the merged row keeps the host times of
    the rounds that have both sides', paired, and so its host change."""

    def side(kernel: float, host: float | None) -> BenchmarkResult:
        return BenchmarkResult(op="op", rows=[_row(kernel).model_copy(
            update={"kernel_host_us": host})])  # fmt: skip

    runs = comparison.Runs(
        after=[side(1.0, None), side(1.0, 60.0), side(1.0, 61.0)],
        before=[side(1.0, None), side(1.0, 50.0), side(1.0, 50.0)],
    )
    row = stats.judged(comparison.merged(runs, mode="workers")).rows[0]
    assert row.kernel_host_samples_us == [60.0, 61.0]
    assert row.before_kernel_host_samples_us == [50.0, 50.0]
    assert row.host_change is not None and row.host_change.rounds == 2
    assert row.host_change.ratio == pytest.approx(1.21)
