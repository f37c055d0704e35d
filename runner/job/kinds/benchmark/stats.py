"""What a comparison's rounds say: each side's median with its 95 % interval, and each row's
change (after over before) with its interval, from latencies paired by round.

Intervals are distribution-free: the order statistics that hold the median with 95 %
probability whatever the distribution (those scipy's `quantile_test` picks, found here from the
binomial distribution in exact integers: importing scipy.stats costs a runner most of a
second), because benchmark noise is not normal: a process's state makes a row bimodal, a
stray round makes a tail. Fewer than six rounds bound no median at 95 %; those intervals are
left open (None) and the report calls the row too noisy to judge. Ratios are taken per round
(after_i / before_i) so what moved both sides in one round, a slow spell of the host or the
device, cancels.

A host time is judged with processes as samples (`process_change`): each process's median
host time per call is one value, and the interval is a t-interval over them, since a
process's host time stays off its tree's for its whole life and rounds within it cannot say
by how much.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from functools import lru_cache
from typing import TYPE_CHECKING

from workflows.models import BenchmarkResult, BenchmarkRow, Change, Rounds

# numpy is imported where it is used: ~80 ms a process, and most processes that import this
# module (a runner, `ondemand run`) compare nothing.
if TYPE_CHECKING:
    import numpy as np

CONFIDENCE = 0.95


@lru_cache(maxsize=256)
def _median_ranks(n: int) -> tuple[int, int]:
    """The indices, in `n` sorted values, of the two-sided interval's ends for the median, as
    scipy's `quantile_test(p=0.5).confidence_interval(CONFIDENCE)` picks them: the low end one
    below the binomial(n, 1/2) quantile of the tail, the high end its inverse survival
    function; exact in integers (an end past the values leaves the interval open)."""
    tail = (1 - Fraction(str(CONFIDENCE))) / 2
    total, cdf = 2**n, 0
    cdfs = []  # cdfs[k]: P(X <= k) * 2**n
    for k in range(n + 1):
        cdf += math.comb(n, k)
        cdfs.append(cdf)
    ppf = next(k for k in range(n + 1) if cdfs[k] >= tail * total)
    isf = next(k for k in range(n + 1) if total - cdfs[k] <= tail * total)
    return ppf - 1, isf


def _interval(values: np.ndarray) -> tuple[float | None, float | None]:
    import numpy as np

    if len(values) < 2:
        return None, None
    low_index, high_index = _median_ranks(len(values))
    if low_index < 0 or high_index >= len(values):
        return None, None
    ordered = np.sort(values)
    low, high = float(ordered[low_index]), float(ordered[high_index])
    if not (math.isfinite(low) and math.isfinite(high)):
        return None, None
    return low, high


def summarize(samples: Sequence[float]) -> Rounds:
    """One side's rounds: their count, median and the median's 95 % interval."""
    import numpy as np

    values = np.asarray(samples, dtype=float)
    low, high = _interval(values)
    return Rounds(rounds=len(values), median=float(np.median(values)), low=low, high=high)


def change(before: Sequence[float], after: Sequence[float]) -> Change | None:
    """After over before, round by round (paired by index; unpaired tails are dropped): the
    median ratio and its 95 % interval. None without a positive pair."""
    import numpy as np

    pairs = [(b, a) for b, a in zip(before, after, strict=False) if b > 0 and a > 0]
    if not pairs:
        return None
    ratios = np.asarray([a / b for b, a in pairs], dtype=float)
    low, high = _interval(ratios)
    return Change(rounds=len(ratios), ratio=float(np.median(ratios)), low=low, high=high)


def process_change(
    before: Sequence[float], after: Sequence[float], floor: float = 0.0
) -> Change | None:
    """After over before across processes (each value one process's median host time per
    call): the ratio of the sides' geometric means and its 95 % interval, a Welch t-interval
    on the logs; open (None) with fewer than two processes a side. None without a positive
    value a side.

    Why this interval: a process is the sample (two processes of one tree differ in host time
    for their whole lives, by a factor that multiplies every call: a log-normal-ish spread),
    so the interval must come from the spread between processes, not from rounds within one.
    With three processes a side no distribution-free interval reaches 95 % (a rank test's
    smallest two-sided p is 2/20) and a bootstrap of three values is no interval at all; the
    t-interval is the one that does, and its few degrees of freedom (Welch's, so a side whose
    processes spread more widens it) make it wide where the processes disagree, which the
    report then calls too noisy. `floor`: the least variance of one process's log host time
    to assume (`spread_floor`), so three processes that agree by chance do not narrow it.
    `rounds` is the processes of the side with fewer."""
    import numpy as np

    a = np.log(np.asarray([v for v in after if v > 0], dtype=float))
    b = np.log(np.asarray([v for v in before if v > 0], dtype=float))
    if not len(a) or not len(b):
        return None
    shift = float(a.mean() - b.mean())
    count = min(len(a), len(b))
    if count < 2:
        return Change(rounds=count, ratio=math.exp(shift), low=None, high=None)
    va = max(float(a.var(ddof=1)), floor) / len(a)
    vb = max(float(b.var(ddof=1)), floor) / len(b)
    se = math.sqrt(va + vb)
    ratio = math.exp(shift)
    if se == 0:
        return Change(rounds=count, ratio=ratio, low=ratio, high=ratio)
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    from scipy import special  # here, and not scipy.stats: a third of its import

    t = float(special.stdtrit(df, 0.5 + CONFIDENCE / 2))  # what scipy.stats.t.ppf computes
    return Change(
        rounds=count, ratio=ratio, low=math.exp(shift - t * se), high=math.exp(shift + t * se)
    )


def spread_floor(rows: Sequence[BenchmarkRow]) -> float:
    """The median, over the rows timed in at least two processes a side, of the variance of
    one process's log host time (the two sides' mean): the least a row's own is taken to be.
    A process's state moves every row's host time, so the job's rows say how far its
    processes spread better than one row's three processes can; 0 without such rows."""
    import numpy as np

    found = []
    for row in rows:
        sides = [row.kernel_host_process_us or [], row.before_kernel_host_process_us or []]
        logs = [np.log([v for v in side if v > 0]) for side in sides]
        if all(len(side) >= 2 for side in logs):
            found.append(float(np.mean([side.var(ddof=1) for side in logs])))
    return float(np.median(found)) if found else 0.0


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
    import numpy as np

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
    the samples are what was measured; across processes where several per tree timed the host
    time), the geometric means' rounds, and the medians as the
    rows' latencies."""
    rows = []
    floor = spread_floor(bench.rows)
    for row in bench.rows:
        after, before = row.kernel_samples_ms, row.before_kernel_samples_ms
        host_after, host_before = row.kernel_host_samples_us, row.before_kernel_host_samples_us
        proc_after, proc_before = row.kernel_host_process_us, row.before_kernel_host_process_us
        update = {  # what the harness wrote of these is never taken on trust
            "kernel_rounds": summarize(after) if after else None,
            "before_rounds": summarize(before) if before else None,
            "change": change(before, after) if after and before else None,
            "host_change": change(host_before, host_after) if host_after and host_before else None,
            "host_process_change": process_change(proc_before, proc_after, floor)
            if proc_after and proc_before
            else None,
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
