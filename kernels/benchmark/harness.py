"""Timing: verify each case once, then time PyTorch's operator and our kernel side by side.

On a GPU the timer is `triton.testing.do_bench`'s method (warm-up, L2 flushed before every
run, device-event timing, the median) with a 1 GiB flush instead of its 256 MB one: zeroing
1 GiB keeps the device busy for about 250 µs per run, longer than any host's per-run work, so
the events time the device alone. With do_bench's flush (about 60 µs) a host slowed by a
busy neighbour lets the device run dry between runs and the gap lands in small kernels'
timings (seen on the H200: 4 µs kernels timed at 10–20 µs in one run, 4 µs in the next).
Every other run flushes in two launches instead of one. On the H200 a one-kernel op's time
depends on the parity of the launches before it: 4 µs kernels take 0.4–0.5 µs longer after an
odd count than after an even one (two-kernel ops take the sum, so never change), and with one
flush launch per run every run of a timing had the same parity: the median was one state or
the other by chance. Alternating the parity puts one run of each state in every two runs in
turn, and a timing is the median of those pairs' means (`pair_means`): the two states average
out within each pair (a probe of both states is in docs/notes/kernel-performance-journal.md).
The runs come in rounds, and the benchmark's timer stops before its budget once the median is
settled: its distribution-free 95 % interval (order statistics) spans at most `precision` of
it (0.5 %: the median within about ±0.25 %, far inside the 10 % a slower row must lose). A
steady row stops after a round or two, a noisy one takes the whole budget. (Over single runs
a one-kernel op's median fell between its two states and never settled, so every timing took
its whole budget.) Host time per call is a separate number: the wall time of 1,000
back-to-back calls synchronized once (`host_us_per_call`), the least of five such
measurements of each side, taken in turn in rounds over every host-bound row once all rows
are timed (`host_us_rounds`): what a caller looping over tiny inputs waits for.
Under the Triton interpreter it is a host clock over a few repetitions: those numbers are not
performance.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from kernels.benchmark.bandwidth import gbps
from kernels.benchmark.definition import Case, KernelMismatch, OpBenchmark
from kernels.benchmark.reach import fastest
from kernels.benchmark.report import Row


class Timing(float):
    """A latency in milliseconds that also says over how many timed runs it was taken."""

    runs: int

    def __new__(cls, ms: float, runs: int) -> Timing:
        timing = super().__new__(cls, ms)
        timing.runs = runs
        return timing

    def __reduce__(self) -> tuple[type[Timing], tuple[float, int]]:
        return Timing, (float(self), self.runs)  # pickled and copied with its count


class Timer(Protocol):
    """Latency of a callable in milliseconds (a `Timing` where the timer counts its runs)."""

    performance: bool
    description: str

    def __call__(self, fn: Callable[[], Any]) -> float: ...


Flush = Literal["zero", "read", "none"]


# The benchmark's default `DeviceTimer.precision`: a median within about ±0.25 %.
PRECISION = 0.005


@dataclass(frozen=True)
class DeviceTimer:
    """Median of the means of device-event timings two runs at a time (`pair_means`), L2
    flushed before every run by zeroing `flush_bytes`, in two launches every other run (both
    launch parities, above); runs of `rep_ms` at most, in rounds of `round_runs`, stopping
    once the median is settled to `precision` (0: the whole budget, always).

    `flush` other than "zero" is for probes, not the benchmark: "read" takes the maximum of
    the buffer instead (L2 left clean, where zeroing leaves it full of dirty lines that the
    timed op writes back), "none" leaves L2 warm and spins the device instead (CUDA only)."""

    warmup_ms: int = 25
    rep_ms: int = 100
    flush_bytes: int = 2**30
    flush: Flush = "zero"
    performance: bool = True
    precision: float = 0.0
    round_runs: int = 64

    @property
    def description(self) -> str:
        how = {
            "zero": f"L2 flushed by zeroing {self.flush_bytes >> 20} MiB",
            "read": f"L2 flushed by reading {self.flush_bytes >> 20} MiB",
            "none": "L2 not flushed, the device kept busy as long between runs",
        }[self.flush]
        rep = f"rep {self.rep_ms} ms"
        if self.precision > 0:
            rep = (
                f"rep up to {self.rep_ms} ms, stopped once the median's 95 % interval is "
                f"within {self.precision * 100:g} % of it"
            )
        return (
            "do_bench method, median of device events two runs at a time "
            f"(warmup {self.warmup_ms} ms, {rep}, {how}, in two launches every other run)"
        )

    def _flusher(self) -> Callable[[Any], Any]:
        if self.flush == "zero":
            return lambda part: part.zero_()
        if self.flush == "read":
            return lambda part: part.amax()
        import torch

        # About as long as zeroing the part at H200 speed, with no memory traffic.
        return lambda part: torch.cuda._sleep(part.numel() // 512)

    def __call__(self, fn: Callable[[], Any]) -> float:
        import torch

        from kernels import runtime

        backend = getattr(torch, runtime.device)
        flush = torch.empty(self.flush_bytes // 4, dtype=torch.int32, device=runtime.device)
        halves = flush.chunk(2)
        clear = self._flusher()

        def event() -> Any:
            return backend.Event(enable_timing=True)

        fn()
        backend.synchronize()
        start, end = event(), event()
        start.record()
        for _ in range(5):
            clear(flush)
            fn()
        end.record()
        backend.synchronize()
        estimate = max(start.elapsed_time(end) / 5, 1e-3)
        for _ in range(max(1, int(self.warmup_ms / estimate))):
            fn()
        runs = max(10, int(self.rep_ms / estimate))
        step = runs if self.precision <= 0 else max(2, self.round_runs - self.round_runs % 2)
        times: list[float] = []
        while len(times) < runs:
            count = min(step, runs - len(times))
            starts, ends = [event() for _ in range(count)], [event() for _ in range(count)]
            for run, (first, last) in enumerate(zip(starts, ends, strict=True), len(times)):
                if run % 2:
                    for half in halves:
                        clear(half)
                else:
                    clear(flush)
                first.record()
                fn()
                last.record()
            backend.synchronize()
            times += [a.elapsed_time(b) for a, b in zip(starts, ends, strict=True)]
            if self.precision > 0 and median_settled(pair_means(times), self.precision):
                break
        return Timing(_positive(statistics.median(pair_means(times))), len(times))


def pair_means(times: Sequence[float]) -> list[float]:
    """The mean of each two runs in turn, (1st, 2nd), (3rd, 4th)…, one of each launch parity
    (the flush alternates): a one-kernel op's two states average out within every pair, where
    the median of single runs would fall between the two states by chance and never settle.
    A last unpaired run is left out (one run alone is its own value)."""
    if len(times) < 2:
        return list(times)
    return [(times[i] + times[i + 1]) / 2 for i in range(0, len(times) - 1, 2)]


def median_interval(samples: Sequence[float], z: float = 1.96) -> tuple[float, float]:
    """A distribution-free confidence interval of the median (95 % for z = 1.96): the order
    statistics of ranks n/2 ∓ z·√n/2, which hold the true median with that probability
    whatever the distribution (the count below it is binomial(n, 1/2))."""
    ordered = sorted(samples)
    n = len(ordered)
    half = z * math.sqrt(n) / 2
    low = max(0, math.floor(n / 2 - half) - 1)
    high = min(n - 1, math.ceil(n / 2 + half))
    return ordered[low], ordered[high]


def median_settled(samples: Sequence[float], precision: float, min_runs: int = 20) -> bool:
    """Whether the median of `samples` is known to `precision` (a fraction of it): its 95 %
    interval (`median_interval`) is at most that wide. Never with fewer than `min_runs`."""
    if len(samples) < min_runs:
        return False
    low, high = median_interval(samples)
    return high - low <= precision * statistics.median(samples)


@dataclass(frozen=True)
class HostTimer:
    """Median wall-clock time of a few calls: for the Triton interpreter, not performance.

    No warm-up by default: the interpreter compiles nothing, and verification already ran
    each callable once."""

    reps: int = 3
    warmup: int = 0
    synchronize: Callable[[], None] = lambda: None  # waits for the device, if there is one
    performance: bool = False

    @property
    def description(self) -> str:
        calls = "call" if self.reps == 1 else "calls"
        return f"host clock median of {self.reps} {calls} (Triton interpreter: not performance)"

    def __call__(self, fn: Callable[[], Any]) -> float:
        for _ in range(self.warmup):
            fn()
        times = []
        for _ in range(self.reps):
            self.synchronize()
            start = time.perf_counter()
            fn()
            self.synchronize()
            times.append((time.perf_counter() - start) * 1e3)
        return Timing(_positive(statistics.median(times)), len(times))


# Host time per call is measured where both sides take less device time than this: past it,
# back-to-back calls queue up behind the device and the loop times the device instead (a
# tiny call's host time is 10-15 µs on an H200's host; the large rows take 16 µs and more).
HOST_BOUND_MS = 0.015


def host_us_per_call(
    fn: Callable[[], Any], synchronize: Callable[[], None], calls: int = 1000
) -> float:
    """Microseconds per call of `calls` back-to-back calls, synchronized once at the end (and
    before the start): for tiny inputs the host's own work per call, not the device's."""
    fn()
    synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    synchronize()
    return (time.perf_counter() - start) / calls * 1e6


# Host-time measurements of each side, taken in turn: a host's hiccups (a scheduler tick, a
# garbage collection) only add, so each side's least is its own cost. An H200 host's loops
# switch between about 9 and 13 µs a call, on both sides, within a single 1,000-call loop:
# rounds spread over the whole run (every host-bound row's loops, then the next round) give
# each side its chances in stretches of the host seconds apart, not milliseconds.
HOST_ROUNDS = 5


def host_us_rounds(
    sides: Sequence[tuple[Callable[[], Any], Callable[[], Any]]],
    synchronize: Callable[[], None],
    calls: int = 1000,
    rounds: int = HOST_ROUNDS,
) -> list[tuple[float, float]]:
    """(PyTorch's, ours) host µs per call for each (reference, kernel) pair in `sides`: the
    least of `rounds` measurements of each (`host_us_per_call`); a round measures every pair
    in order, PyTorch's side then ours, so a slow spell of the host hits both sides of a row."""
    least = [(math.inf, math.inf)] * len(sides)
    for _ in range(rounds):
        for i, (reference, kernel) in enumerate(sides):
            ref = host_us_per_call(reference, synchronize, calls)
            ker = host_us_per_call(kernel, synchronize, calls)
            least[i] = (min(least[i][0], ref), min(least[i][1], ker))
    return least


def _positive(ms: float) -> float:
    if not ms > 0:
        raise RuntimeError(f"timer returned a non-positive latency: {ms} ms")
    return ms


class BenchmarkError(Exception):
    """A case could not be measured: its kernel is wrong, or something raised."""


def make_row(
    case: Case,
    reference_ms: float,
    kernel_ms: float,
    traffic: int,
    copy_gbps: float | None,
    reach: tuple[float, str] | None = None,
) -> Row:
    """One table row, its host times left for `run_cases` to fill in; bandwidth fraction only
    when the copy bandwidth is known; each side's run count where its timer gave one
    (`Timing`); `reach` the row's (ms, mover layout) where measured."""
    achieved = gbps(traffic, kernel_ms)
    return Row(
        dtype=case.dtype,
        size=list(case.size),
        output_size=list(case.output_size),
        reference_ms=float(reference_ms),
        kernel_ms=float(kernel_ms),
        speedup=reference_ms / kernel_ms,
        gbps=achieved,
        bandwidth_fraction=achieved / copy_gbps if copy_gbps else None,
        reference_runs=getattr(reference_ms, "runs", None),
        kernel_runs=getattr(kernel_ms, "runs", None),
        reach_ms=reach[0] if reach else None,
        reach_layout=reach[1] if reach else None,
    )


def run_cases(
    bench: OpBenchmark,
    cases: Iterable[Case],
    kernel_fn: Callable[..., Any],
    device: str,
    timer: Timer,
    copy_gbps: float | None,
    on_case: Callable[[Case], None] = lambda case: None,
    host_calls: int = 0,
    synchronize: Callable[[], None] = lambda: None,
    reach: bool = False,
) -> list[Row]:
    """Verify, then time, every case in order; with `host_calls`, also each side's host time
    per call over that many calls on rows short enough to be host-bound (HOST_BOUND_MS),
    measured in rounds over all such rows once every row is timed (`host_us_rounds`); with
    `reach`, also the row's reach with the same timer (`kernels.benchmark.reach`).
    Raises BenchmarkError on the first failure."""
    rows: list[Row] = []
    host_bound: list[tuple[int, Any]] = []  # (row, prepared case) whose host time is measured
    for case in cases:
        on_case(case)
        where = f"{bench.name} {case.label()}"
        try:
            prepared = bench.prepare(case, device, kernel_fn)
            prepared.verify()
            reference_ms = timer(prepared.reference)
            kernel_ms = timer(prepared.kernel)
            if host_calls > 0 and max(reference_ms, kernel_ms) < HOST_BOUND_MS:
                host_bound.append((len(rows), prepared))
            moved = fastest(prepared.split, device, timer) if reach else None
        except KernelMismatch as exc:
            raise BenchmarkError(f"{where}: kernel result differs from PyTorch's: {exc}") from exc
        except Exception as exc:
            raise BenchmarkError(f"{where}: {type(exc).__name__}: {exc}") from exc
        rows.append(
            make_row(case, reference_ms, kernel_ms, prepared.traffic_bytes, copy_gbps, moved)
        )
        del prepared
    if host_bound:
        try:
            sides = [(kept.reference, kept.kernel) for _, kept in host_bound]
            host_us = host_us_rounds(sides, synchronize, host_calls)
        except Exception as exc:
            raise BenchmarkError(f"{bench.name} host time: {type(exc).__name__}: {exc}") from exc
        for (i, _), (reference_us, kernel_us) in zip(host_bound, host_us, strict=True):
            rows[i] = dataclasses.replace(
                rows[i], reference_host_us=reference_us, kernel_host_us=kernel_us
            )
    return rows
