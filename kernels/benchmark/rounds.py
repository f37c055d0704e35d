"""Before and after in rounds: each row's reference, merge-base kernel and pull-request kernel
timed in turn, round after round, until the row's change is known or the budget is spent.

Every row is prepared once (the current benchmark definition; both kernels read the same
input tensors) and checked on both sides. A round times each unsettled row's three sides with
a short timer, in an order that cycles through all six permutations, so no side is always
first or last. After `min_rounds`, a row whose after/before ratio is settled (the 95 %
interval of its median within `target` either side, `harness.median_interval`) drops out;
the rounds stop when every row has, or when another round would not fit in `budget_s`;
short of `min_rounds` (no verdict without them), the rounds still missing may run on to
`REACH` × `budget_s`. The samples go out per round (paired by index); what they mean is
judged by the runner.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kernels.benchmark.bandwidth import gbps
from kernels.benchmark.definition import Case, KernelMismatch, OpBenchmark, Prepared
from kernels.benchmark.harness import (
    HOST_BOUND_MS,
    BenchmarkError,
    Timer,
    host_us_rounds,
    median_interval,
)
from kernels.benchmark.report import Row

SIDES = ("reference", "before", "after")
ORDERS = tuple(itertools.permutations(SIDES))
MIN_ROUNDS = 6  # the fewest a distribution-free 95 % interval of a median needs
MAX_ROUNDS = 60
TARGET = 0.025  # a row is settled once its change is known within ±2.5 %
REACH = 1.5  # how far past the budget the rounds a verdict needs may run


class Switch:
    """The kernel a prepared case calls: whichever side is in use."""

    def __init__(self, after: Callable[..., Any], before: Callable[..., Any]) -> None:
        self.sides = {"after": after, "before": before}
        self.active = after

    def use(self, side: str) -> None:
        self.active = self.sides[side]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.active(*args, **kwargs)


@dataclass
class Samples:
    """One row's latencies, one a round per side (ms); not `compared` where the merge base's
    kernel gave a wrong result (its side is not timed)."""

    reference: list[float] = field(default_factory=list)
    before: list[float] = field(default_factory=list)
    after: list[float] = field(default_factory=list)
    compared: bool = True


def settled(samples: Samples, target: float, min_rounds: int = MIN_ROUNDS) -> bool:
    """Whether the row's after/before is known within `target` (a fraction) either side."""
    ratios = [a / b for a, b in zip(samples.after, samples.before, strict=False)]
    if len(ratios) < min_rounds:
        return False
    low, high = median_interval(ratios)
    return math.log(high / low) / 2 <= math.log1p(target)


@dataclass(frozen=True)
class Plan:
    """How long the rounds may run and when a row is done."""

    budget_s: float = 20.0
    target: float = TARGET
    min_rounds: int = MIN_ROUNDS
    max_rounds: int = MAX_ROUNDS


def time_rounds(
    prepared: Sequence[tuple[Prepared, Switch]],
    samples: Sequence[Samples],
    timer: Timer,
    plan: Plan,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """Time the rows in rounds into `samples` (see the module); returns the rounds run."""
    started = clock()
    rounds = 0
    last = 0.0
    while rounds < plan.max_rounds:
        active = [
            i
            for i, s in enumerate(samples)
            if len(s.after) < plan.min_rounds
            or (s.compared and not settled(s, plan.target, plan.min_rounds))
        ]
        if not active or (rounds and not fits(clock() - started, rounds, last, plan)):
            break
        begun = clock()
        for i in active:
            case, switch = prepared[i]
            for side in ORDERS[rounds % len(ORDERS)]:
                if side == "before" and not samples[i].compared:
                    continue
                if side == "reference":
                    samples[i].reference.append(float(timer(case.reference)))
                    continue
                switch.use(side)
                getattr(samples[i], side).append(float(timer(case.kernel)))
        switch_all(prepared, "after")
        last = clock() - begun
        rounds += 1
    return rounds


def fits(elapsed_s: float, rounds: int, round_s: float, plan: Plan) -> bool:
    """Whether another round of `round_s` fits: within the budget, or, short of
    `min_rounds`, when the rounds still missing end within REACH × the budget."""
    if elapsed_s + round_s <= plan.budget_s:
        return True
    missing = plan.min_rounds - rounds
    return missing > 0 and elapsed_s + missing * round_s <= plan.budget_s * REACH


def switch_all(prepared: Iterable[tuple[Prepared, Switch]], side: str) -> None:
    for _, switch in prepared:
        switch.use(side)


def compare_cases(
    bench: OpBenchmark,
    cases: Iterable[Case],
    after: Callable[..., Any],
    before: Callable[..., Any],
    device: str,
    timer: Timer,
    copy_gbps: float | None,
    plan: Plan,
    on_case: Callable[[Case], None] = lambda case: None,
    host_calls: int = 0,
    synchronize: Callable[[], None] = lambda: None,
) -> list[Row]:
    """Every case prepared and checked on both sides, then timed in rounds (`time_rounds`);
    a row per case with each side's median and its per-round samples; with `host_calls`, the
    pull request's host time per call on host-bound rows as `run_cases` measures it.
    Raises BenchmarkError when the pull request's kernel is wrong or a case raises."""
    prepared: list[tuple[Prepared, Switch]] = []
    samples: list[Samples] = []
    kept: list[Case] = []
    for case in cases:
        on_case(case)
        where = f"{bench.name} {case.label()}"
        switch = Switch(after, before)
        try:
            ready = bench.prepare(case, device, switch)
            ready.verify()
            row = Samples()
            switch.use("before")
            try:
                ready.verify()
            except Exception as exc:  # the merge base's own fault: its row is not compared
                row.compared = False
                print(f"note: {where}: the merge base's kernel fails: {exc}", file=sys.stderr)
            switch.use("after")
        except KernelMismatch as exc:
            raise BenchmarkError(f"{where}: kernel result differs from PyTorch's: {exc}") from exc
        except Exception as exc:
            raise BenchmarkError(f"{where}: {type(exc).__name__}: {exc}") from exc
        prepared.append((ready, switch))
        samples.append(row)
        kept.append(case)
    try:
        time_rounds(prepared, samples, timer, plan)
    except Exception as exc:
        raise BenchmarkError(f"{bench.name} rounds: {type(exc).__name__}: {exc}") from exc
    rows = [
        _row(case, s, ready.traffic_bytes, copy_gbps)
        for case, s, (ready, _) in zip(kept, samples, prepared, strict=True)
    ]
    bound = [i for i, r in enumerate(rows) if max(r.reference_ms, r.kernel_ms) < HOST_BOUND_MS]
    if host_calls > 0 and bound:
        try:
            sides = [(prepared[i][0].reference, prepared[i][0].kernel) for i in bound]
            host_us = host_us_rounds(sides, synchronize, host_calls)
        except Exception as exc:
            raise BenchmarkError(f"{bench.name} host time: {type(exc).__name__}: {exc}") from exc
        for i, (reference_us, kernel_us) in zip(bound, host_us, strict=True):
            rows[i] = dataclasses.replace(
                rows[i], reference_host_us=reference_us, kernel_host_us=kernel_us
            )
    return rows


def summary(values: Sequence[float]) -> dict[str, Any]:
    """Rounds, median and the median's 95 % interval (None where too few rounds bound it)."""
    low, high = median_interval(values)
    bounded = len(values) >= MIN_ROUNDS
    return {
        "rounds": len(values),
        "median": statistics.median(values),
        "low": low if bounded else None,
        "high": high if bounded else None,
    }


def _row(case: Case, samples: Samples, traffic: int, copy_gbps: float | None) -> Row:
    reference_ms = statistics.median(samples.reference)
    kernel_ms = statistics.median(samples.after)
    before_ms = statistics.median(samples.before) if samples.compared else None
    achieved = gbps(traffic, kernel_ms)
    return Row(
        dtype=case.dtype,
        size=list(case.size),
        output_size=list(case.output_size),
        reference_ms=reference_ms,
        kernel_ms=kernel_ms,
        speedup=reference_ms / kernel_ms,
        gbps=achieved,
        bandwidth_fraction=achieved / copy_gbps if copy_gbps else None,
        before_kernel_ms=before_ms,
        before_speedup=reference_ms / before_ms if before_ms else None,
        reference_samples_ms=list(samples.reference),
        kernel_samples_ms=list(samples.after),
        before_kernel_samples_ms=list(samples.before) if samples.compared else None,
        kernel_rounds=summary(samples.after),
        before_rounds=summary(samples.before) if samples.compared else None,
    )
