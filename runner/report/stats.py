"""What a comparison's rounds say: each side's median with its 95 % interval, and each row's
change (after over before) with its interval, from latencies paired by round.

Intervals are distribution-free: the order statistics that hold the median with 95 %
probability whatever the distribution (scipy's `quantile_test`), because benchmark noise is
not normal: a process's state makes a row bimodal, a stray round makes a tail. Fewer than six
rounds bound no median at 95 %; those intervals are left open (None) and the report calls
the row too noisy to judge. Ratios are taken per round (after_i / before_i) so what moved both
sides in one round, a slow spell of the host or the device, cancels.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from workflows.models import BenchmarkResult, BenchmarkRow, Change, Rounds

CONFIDENCE = 0.95


def _interval(values: np.ndarray) -> tuple[float | None, float | None]:
    if len(values) < 2:
        return None, None
    from scipy import stats  # here: scipy.stats takes most of a second to import, per process

    ci = stats.quantile_test(values, q=float(np.median(values)), p=0.5).confidence_interval(
        CONFIDENCE
    )
    low, high = float(ci.low), float(ci.high)
    if not (math.isfinite(low) and math.isfinite(high)):
        return None, None
    return low, high


def summarize(samples: Sequence[float]) -> Rounds:
    """One side's rounds: their count, median and the median's 95 % interval."""
    values = np.asarray(samples, dtype=float)
    low, high = _interval(values)
    return Rounds(rounds=len(values), median=float(np.median(values)), low=low, high=high)


def change(before: Sequence[float], after: Sequence[float]) -> Change | None:
    """After over before, round by round (paired by index; unpaired tails are dropped): the
    median ratio and its 95 % interval. None without a positive pair."""
    pairs = [(b, a) for b, a in zip(before, after, strict=False) if b > 0 and a > 0]
    if not pairs:
        return None
    ratios = np.asarray([a / b for b, a in pairs], dtype=float)
    low, high = _interval(ratios)
    return Change(rounds=len(ratios), ratio=float(np.median(ratios)), low=low, high=high)


def half_width(change: Change) -> float | None:
    """The change's noise band: half its interval's width on a log scale, as a fraction
    (0.03 is ±3 %); None where the interval is open."""
    if change.low is None or change.high is None or change.low <= 0:
        return None
    return math.expm1(math.log(change.high / change.low) / 2)


def settled(before: Sequence[float], after: Sequence[float], target: float) -> bool:
    """Whether the change is known within `target` either side."""
    found = change(before, after)
    band = half_width(found) if found is not None else None
    return band is not None and band <= target


def _geomean_rounds(rows: Sequence[BenchmarkRow], side: str) -> Rounds | None:
    """The geometric-mean speedup over the rows, per round (over the rounds every row has)."""
    series = []
    for row in rows:
        kernel = row.kernel_samples_ms if side == "after" else row.before_kernel_samples_ms
        if not kernel or not row.reference_samples_ms:
            return None
        series.append((row.reference_samples_ms, kernel))
    count = min(min(len(ref), len(ker)) for ref, ker in series) if series else 0
    if count == 0:
        return None
    logs = np.asarray(
        [[math.log(ref[i] / ker[i]) for ref, ker in series] for i in range(count)], dtype=float
    )
    return summarize(np.exp(logs.mean(axis=1)).tolist())


def judged(bench: BenchmarkResult) -> BenchmarkResult:
    """The benchmark with what its rounds say filled in: each side's summary and each row's
    change (and its host time's, where the rounds measured it) from its samples (recomputed:
    the samples are what was measured), the geometric means' rounds, and the medians as the
    rows' latencies."""
    rows = []
    for row in bench.rows:
        after, before = row.kernel_samples_ms, row.before_kernel_samples_ms
        host_after, host_before = row.kernel_host_samples_us, row.before_kernel_host_samples_us
        update = {  # what the harness wrote of these is never taken on trust
            "kernel_rounds": summarize(after) if after else None,
            "before_rounds": summarize(before) if before else None,
            "change": change(before, after) if after and before else None,
            "host_change": change(host_before, host_after) if host_after and host_before else None,
        }
        rows.append(row.model_copy(update=update))
    compared = [r for r in rows if r.before_kernel_samples_ms]
    return bench.model_copy(
        update={
            "rows": rows,
            "geometric_mean_rounds": _geomean_rounds(rows, "after"),
            "before_geometric_mean_rounds": _geomean_rounds(compared, "before")
            if len(compared) == len(rows)
            else None,
        }
    )
