"""What a row's before → after change says, given the repository's threshold: pure.

A row is slower (or faster) only when the whole 95 % interval of its change lies beyond the
threshold; a row whose noise band (half its interval, on a log scale) is wider than the
threshold, or whose interval is open (too few rounds), is too noisy to judge and never
flagged; anything else is no significant change. The smallest change a row can detect is the
threshold plus its noise band.

A host-bound row (its kernel's host time per call clearly above its device time, on either
side) shows its host time's change beside the device's, but only the device time is
judged: each side's host time comes from one process, and processes of one tree differ in
host time for long stretches (FlagGems A/A jobs on an H100 read host changes of up to +117 %
where the device read ±1 %), so a host verdict would flag processes, not code.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from workflows.models import BenchmarkResult, BenchmarkRow, Change

DEFAULT_THRESHOLD = 0.10
# A row is host-bound when its kernel's host time per call exceeds its device time by more
# than this: back to back, a device-bound call's host time is about its device time (the
# launches queue behind the kernels), so only a clear excess says the host sets the pace.
HOST_BOUND = 1.2


class Verdict(StrEnum):
    slower = "slower"
    faster = "faster"
    same = "same"  # no significant change
    noisy = "noisy"  # too noisy to judge


@dataclass(frozen=True)
class Judged:
    """A compared row, its change and what it says (for a host-bound row, with its host
    time's change, shown and never weighed in `verdict`)."""

    row: BenchmarkRow
    change: Change
    verdict: Verdict
    host_change: Change | None = None

    @property
    def band(self) -> float | None:
        return noise_band(self.change)


def row_change(row: BenchmarkRow) -> Change | None:
    """The row's change: its rounds', or, for a row measured once a side (an older job), a
    change of one round with an open interval."""
    if row.change is not None:
        return row.change
    if row.before_kernel_ms and row.before_kernel_ms > 0 and row.kernel_ms > 0:
        return Change(rounds=1, ratio=row.kernel_ms / row.before_kernel_ms, low=None, high=None)
    return None


def noise_band(change: Change) -> float | None:
    """Half the interval's width on a log scale, as a fraction (0.03: ±3 %); None if open."""
    if change.low is None or change.high is None or change.low <= 0 or change.high <= 0:
        return None
    return math.expm1(math.log(change.high / change.low) / 2)


def judge(change: Change, threshold: float) -> Verdict:
    band = noise_band(change)
    if band is None or band > threshold:
        return Verdict.noisy
    assert change.low is not None and change.high is not None
    if change.low > 1 + threshold:
        return Verdict.slower
    if change.high < 1 - threshold:
        return Verdict.faster
    return Verdict.same


def is_host_bound(
    host_us: float | None, device_ms: float | None, ratio: float = HOST_BOUND
) -> bool:
    """Whether a host time per call (µs) exceeds the device time per call (ms) by `ratio`."""
    return (
        host_us is not None and device_ms is not None and device_ms > 0
        and host_us / 1000 > device_ms * ratio
    )  # fmt: skip


def host_bound_row(row: BenchmarkRow, ratio: float = HOST_BOUND) -> bool:
    """Whether the row's kernel is host-bound after, or was before."""
    return is_host_bound(row.kernel_host_us, row.kernel_ms, ratio) or is_host_bound(
        row.before_kernel_host_us, row.before_kernel_ms, ratio
    )


def judged_rows(bench: BenchmarkResult, threshold: float) -> list[Judged]:
    """Every compared row with its verdict, in the table's order."""
    out = []
    for row in bench.rows:
        change = row_change(row)
        if change is None:
            continue
        host = row.host_change if host_bound_row(row) else None
        out.append(Judged(row, change, judge(change, threshold), host))
    return out


def of(judged: Sequence[Judged], verdict: Verdict) -> list[Judged]:
    """The rows with `verdict`, the largest change first (slowest for slower, fastest for
    faster)."""
    rows = [j for j in judged if j.verdict is verdict]
    return sorted(rows, key=lambda j: j.change.ratio, reverse=verdict is not Verdict.faster)


def detectable(change: Change, threshold: float) -> float | None:
    """The smallest slowdown (a fraction) the row could have flagged: the threshold plus
    its noise band; None where it could flag none (an open interval or one too wide)."""
    band = noise_band(change)
    if band is None or band > threshold:
        return None
    return (1 + threshold) * (1 + band) - 1


def percent(change: Change) -> str:
    """`+12.3 %`, `-4.0 %`: the change in latency."""
    return f"{(change.ratio - 1) * 100:+.1f} %"


def band_text(change: Change) -> str:
    """`±2.1 %`, or `±?` for an open interval."""
    band = noise_band(change)
    return "±?" if band is None else f"±{band * 100:.1f} %"
