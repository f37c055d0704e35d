"""What a row's before → after change says, given the repository's threshold: pure.

A row is slower (or faster) only when the whole 95 % interval of its change lies beyond the
threshold; a row whose noise band (half its interval, on a log scale) is wider than the
threshold, or whose interval is open (too few rounds), is too noisy to judge and never
flagged; anything else is no significant change. The smallest change a row can detect is the
threshold plus its noise band.

A host-bound row (its kernel's host time per call clearly above its device time, on either
side) is judged on both: its device time's change as any row's, and its host time's change
the same way where several processes per tree timed it (`host_process_change`: processes as
samples, so its interval spans the spread between processes, which is what moves host time:
FlagGems A/A jobs on an H100 read host changes of up to +117 % between one process a side
where the device read ±1 %). Either one beyond the threshold flags the row; a host change
whose band is wider than the threshold is "host too noisy" and flags nothing. Where each side
had one process (an older runner, `compare.host_processes: 1`), the host change is paired by
round within those two processes: shown, never judged, since it would judge the processes,
not the code.
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
    """A compared row, its device change and what it says; for a host-bound row, its host
    change and, where processes judged it, what that says (`host_verdict`). `verdict` is the
    row's: slower where either is slower, else faster where either is faster, else the
    device's."""

    row: BenchmarkRow
    change: Change
    device_verdict: Verdict
    host_change: Change | None = None
    host_verdict: Verdict | None = None  # None: the host change is shown, not judged

    @property
    def verdict(self) -> Verdict:
        both = (self.device_verdict, self.host_verdict)
        for flagged in (Verdict.slower, Verdict.faster):
            if flagged in both:
                return flagged
        return self.device_verdict

    @property
    def on_host(self) -> bool:
        """Whether the row's verdict is its host time's alone (a host change flagged it and
        the device change did not)."""
        return self.host_verdict is self.verdict and self.device_verdict is not self.verdict

    @property
    def deciding(self) -> Change:
        """The change that gave the verdict: the host's where it alone did, else the
        device's."""
        return self.host_change if self.on_host and self.host_change is not None else self.change

    @property
    def band(self) -> float | None:
        return noise_band(self.change)

    @property
    def host_band(self) -> float | None:
        """The judged host change's noise band; None where it is not judged or is open."""
        if self.host_verdict is None or self.host_change is None:
            return None
        return noise_band(self.host_change)


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
    """Every compared row with its verdict, in the table's order: a host-bound row's host
    change judged where processes measured it, else shown."""
    out = []
    for row in bench.rows:
        change = row_change(row)
        if change is None:
            continue
        device = judge(change, threshold)
        if not host_bound_row(row):
            out.append(Judged(row, change, device))
        elif row.host_process_change is not None:
            host = row.host_process_change
            out.append(Judged(row, change, device, host, judge(host, threshold)))
        else:
            out.append(Judged(row, change, device, row.host_change))
    return out


def of(judged: Sequence[Judged], verdict: Verdict) -> list[Judged]:
    """The rows with `verdict`, the largest change first (slowest for slower, fastest for
    faster), by the change that gave it (`Judged.deciding`)."""
    rows = [j for j in judged if j.verdict is verdict]
    return sorted(rows, key=lambda j: j.deciding.ratio, reverse=verdict is not Verdict.faster)


def host_judged(judged: Sequence[Judged]) -> list[Judged]:
    """The rows whose host change was judged (host-bound, timed in several processes)."""
    return [j for j in judged if j.host_verdict is not None]


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
