"""Timing: verify each case once, then time PyTorch's operator and our kernel side by side.

On a GPU the timer is `triton.testing.do_bench` (warm-up, L2 flushed before every run,
device-event timing, the median). Under the Triton interpreter it is a host clock over a few
repetitions: those numbers are not performance.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from kernels.benchmark.bandwidth import gbps
from kernels.benchmark.definition import Case, KernelMismatch, OpBenchmark
from kernels.benchmark.report import Row


class Timer(Protocol):
    """Latency of a callable in milliseconds."""

    performance: bool
    description: str

    def __call__(self, fn: Callable[[], Any]) -> float: ...


@dataclass(frozen=True)
class DeviceTimer:
    """`triton.testing.do_bench`: median of device-event timings, L2 flushed between runs."""

    warmup_ms: int = 25
    rep_ms: int = 100
    performance: bool = True

    @property
    def description(self) -> str:
        return f"triton.testing.do_bench median (warmup {self.warmup_ms} ms, rep {self.rep_ms} ms)"

    def __call__(self, fn: Callable[[], Any]) -> float:
        from triton.testing import do_bench  # after kernels set up the interpreter, if any

        # quantiles=[0.5] is the median on every Triton 3.x (return_mode varies by version).
        result = do_bench(fn, warmup=self.warmup_ms, rep=self.rep_ms, quantiles=[0.5])
        ms = float(result[0] if isinstance(result, list | tuple) else result)
        return _positive(ms)


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
        return _positive(statistics.median(times))


def _positive(ms: float) -> float:
    if not ms > 0:
        raise RuntimeError(f"timer returned a non-positive latency: {ms} ms")
    return ms


class BenchmarkError(Exception):
    """A case could not be measured: its kernel is wrong, or something raised."""


def make_row(
    case: Case, reference_ms: float, kernel_ms: float, traffic: int, copy_gbps: float | None
) -> Row:
    """One table row; bandwidth fraction only when the copy bandwidth is known."""
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
    )


def run_cases(
    bench: OpBenchmark,
    cases: Iterable[Case],
    kernel_fn: Callable[..., Any],
    device: str,
    timer: Timer,
    copy_gbps: float | None,
    on_case: Callable[[Case], None] = lambda case: None,
) -> list[Row]:
    """Verify, then time, every case in order. Raises BenchmarkError on the first failure."""
    rows: list[Row] = []
    for case in cases:
        on_case(case)
        where = f"{bench.name} {case.label()}"
        try:
            prepared = bench.prepare(case, device, kernel_fn)
            prepared.verify()
            reference_ms = timer(prepared.reference)
            kernel_ms = timer(prepared.kernel)
        except KernelMismatch as exc:
            raise BenchmarkError(f"{where}: kernel result differs from PyTorch's: {exc}") from exc
        except Exception as exc:
            raise BenchmarkError(f"{where}: {type(exc).__name__}: {exc}") from exc
        rows.append(make_row(case, reference_ms, kernel_ms, prepared.traffic_bytes, copy_gbps))
        del prepared
    return rows
