"""One process of the FlagGems noise probe: where one benchmark row's time goes.

For each case (FlagGems' adaptive_max_pool3d_backward as its benchmark calls it, torch's own
backward and forward, FlagGems' adaptive_max_pool2d forward; small and large inputs) it
measures, in this one process:

- `kernel`: FlagGems' own timer (`benchmark.base.Benchmark.get_latency`, mode `kernel`:
  `triton.testing.do_bench`, median, a 256 MB L2 flush before each timed call), first with the
  harness's warm-up (1000 ms), then `--repeats` more with a shorter one;
- `wrapper`, `operator`: the harness's host-clock modes, once each (`cudagraph`, graph
  replays without flush, for every case at the end of the process);
- `host`: wall clock around many back-to-back calls, synchronized once at the end, per call;
  `launch`: the same without waiting for the device (the host's share alone);
- `events`: CUDA events around that batch, per call; `device`: the profiler's kernels (and
  memsets and copies) per call, summed from their device durations;
- `loop_*`: do_bench's timed loop redone here with events per call: `flush` as do_bench
  does, `pad` with a device spin of `--pad-ms` after the flush (the host's launches then
  wait in the queue, so the events see the device alone), `none` without flush or spin.

Once a process: the flush's own device time, and for the first case the host time and the
`kernel` latency with the process pinned to each CPU in turn. Writes JSON lines to `--out`
(one for the process, one a case, one for the CPU scan); `tools/flaggems_noise.py` reads them.

    PYTHONPATH=FLAGGEMS:FLAGGEMS/src python3 tools/flaggems_noise_driver.py --out p1.jsonl
    python3 tools/flaggems_noise_driver.py --fake --out /tmp/p.jsonl   # the logic, no GPU
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

HARNESS_WARMUP_MS = 1000  # FlagGems' DEFAULT_WARMUP_TIME
HARNESS_REP_MS = 100  # FlagGems' DEFAULT_ITER_TIME
Fn = Callable[[], object]


@dataclass(frozen=True)
class Case:
    """One row: which operator, whose implementation, the input and the output size."""

    name: str
    op: str  # bwd3d, fwd3d or fwd2d
    impl: str  # gems or torch
    dtype: str
    shape: tuple[int, ...]
    out: tuple[int, ...]


CASES = [
    # FlagGems' benchmark rows 1 and 7 of its `core` level, then two sizes it does not run.
    Case("gems-bwd-f16-s", "bwd3d", "gems", "float16", (1, 1, 8, 8, 8), (4, 4, 4)),
    Case("gems-bwd-f32-c", "bwd3d", "gems", "float32", (1, 1, 32, 32, 32), (16, 16, 16)),
    Case("gems-bwd-f16-m", "bwd3d", "gems", "float16", (4, 32, 32, 64, 64), (16, 32, 32)),
    Case("gems-bwd-f16-L", "bwd3d", "gems", "float16", (16, 64, 32, 64, 64), (16, 32, 32)),
    # The same rows' torch side (the records' latency_base), and torch's forward.
    Case("torch-bwd-f16-s", "bwd3d", "torch", "float16", (1, 1, 8, 8, 8), (4, 4, 4)),
    Case("torch-bwd-f16-L", "bwd3d", "torch", "float16", (16, 64, 32, 64, 64), (16, 32, 32)),
    Case("torch-fwd-f16-s", "fwd3d", "torch", "float16", (1, 1, 8, 8, 8), (4, 4, 4)),
    Case("torch-fwd-f16-L", "fwd3d", "torch", "float16", (16, 64, 32, 64, 64), (16, 32, 32)),
    # FlagGems has no adaptive_max_pool3d forward; its 2-D forward is the nearest (its
    # benchmark's first and last shape).
    Case("gems-fwd2d-f16-s", "fwd2d", "gems", "float16", (4, 3, 32, 32), (7, 7)),
    Case("gems-fwd2d-f16-L", "fwd2d", "gems", "float16", (4, 128, 112, 112), (14, 14)),
]


class Backend(Protocol):
    """What the measurements need from the device; `Cuda` on a GPU, `Fake` for the logic."""

    info: dict[str, Any]

    def prepare(self, case: Case) -> Fn: ...
    def context(self, case: Case) -> AbstractContextManager[object]: ...
    def sync(self) -> None: ...
    def harness(self, mode: str, warmup_ms: int, rep_ms: int) -> float: ...
    def events_ms(self, fn: Fn, calls: int) -> float: ...
    def loop(self, fn: Fn, calls: int, flush: bool, pad_ms: float) -> list[float]: ...
    def profile(self, fn: Fn, calls: int) -> dict[str, Any]: ...
    def flush_ms(self) -> float: ...
    def tuning(self, case: Case) -> dict[str, str]: ...


def current_cpu() -> int:
    """The CPU this thread runs on now (-1 where /proc does not say)."""
    try:
        fields = Path("/proc/thread-self/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[36])
    except (OSError, IndexError, ValueError):
        return -1


def wall_ms(fn: Fn, calls: int, sync: Callable[[], None], wait: bool = True) -> float:
    """Wall clock per call around `calls` back-to-back calls; synchronized once at the end
    (`wait`), or read before synchronizing (the host's launch time alone)."""
    sync()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    if wait:
        sync()
    elapsed = time.perf_counter() - start
    sync()
    return elapsed * 1000 / calls


def python_ms(loops: int = 3) -> float:
    """The fastest of `loops` runs of a fixed pure-Python loop: the CPU's speed alone."""
    best = float("inf")
    for _ in range(loops):
        start = time.perf_counter()
        total = 0
        for i in range(100_000):
            total += i * i
        best = min(best, time.perf_counter() - start)
    return best * 1000


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def measure(b: Backend, case: Case, repeats: int, warmup_ms: int, pad_ms: float) -> dict:
    """Every measurement of one case, in this process (see the module's docstring)."""
    row: dict[str, Any] = {"kind": "case", **asdict(case), "cpu_start": current_cpu()}
    row["start"] = datetime.now().isoformat(timespec="milliseconds")
    fn = b.prepare(case)
    with b.context(case):
        t = time.perf_counter()
        fn()
        b.sync()
        row["first_call_ms"] = (time.perf_counter() - t) * 1000
        for _ in range(3):
            fn()
        b.sync()
        row["tuning"] = b.tuning(case)
        row["kernel_first"] = b.harness("kernel", HARNESS_WARMUP_MS, HARNESS_REP_MS)
        row["kernel"] = [b.harness("kernel", warmup_ms, HARNESS_REP_MS) for _ in range(repeats)]
        estimate = wall_ms(fn, 10, b.sync)
        calls = max(20, min(2000, int(60 / max(estimate, 1e-3))))
        row["calls"] = calls
        row["host"] = [wall_ms(fn, calls, b.sync) for _ in range(3)]
        row["launch"] = [wall_ms(fn, calls, b.sync, wait=False) for _ in range(3)]
        row["events"] = [b.events_ms(fn, calls) for _ in range(3)]
        loop_calls = max(10, min(50, calls))
        row["loop_flush"] = b.loop(fn, loop_calls, True, 0.0)
        row["loop_pad"] = b.loop(fn, loop_calls, True, pad_ms)
        row["loop_none"] = b.loop(fn, loop_calls, False, 0.0)
        row["profile"] = b.profile(fn, 20)
        for mode in ("wrapper", "operator"):
            row[mode] = b.harness(mode, warmup_ms, HARNESS_REP_MS)
    row["cpu_end"] = current_cpu()
    row["end"] = datetime.now().isoformat(timespec="milliseconds")
    return row


def graph_pass(b: Backend, cases: list[Case], rounds: int) -> dict:
    """The harness's `cudagraph` mode for every case, last in the process: a capture that
    fails can leave the device unusable for what follows."""
    rows: dict[str, list[float]] = {}
    for case in cases:
        b.prepare(case)
        with b.context(case):
            try:
                rows[case.name] = [b.harness("cudagraph", 0, HARNESS_REP_MS) for _ in range(rounds)]
            except Exception as exc:
                return {"kind": "graph", "rows": rows, "error": f"{case.name}: {exc!r}"[:300]}
    return {"kind": "graph", "rows": rows}


def cpu_scan(b: Backend, case: Case, cpus: list[int]) -> dict:
    """The case's host time per call and `kernel` latency with this thread on each CPU."""
    fn = b.prepare(case)
    before = os.sched_getaffinity(0)
    rows = []
    with b.context(case):
        for cpu in cpus:
            os.sched_setaffinity(0, {cpu})
            rows.append(
                {
                    "cpu": cpu,
                    "python_ms": python_ms(),
                    "host": wall_ms(fn, 200, b.sync),
                    "kernel": b.harness("kernel", 50, 50),
                }
            )
    os.sched_setaffinity(0, before)
    return {"kind": "cpus", "case": case.name, "rows": rows}


class Fake:
    """The host-only stand-in: each call spins `host_us` on the CPU; the 'device' takes
    `device_us` and overlaps nothing; the flush takes `flush_us`."""

    def __init__(self, host_us: float = 50.0, device_us: float = 5.0, flush_us: float = 20.0):
        self.host_s, self.device_ms, self.flush = host_us / 1e6, device_us / 1e3, flush_us / 1e3
        self.info = {"backend": "fake"}

    def _call(self) -> None:
        end = time.perf_counter() + self.host_s
        while time.perf_counter() < end:
            pass

    def prepare(self, case: Case) -> Fn:
        return self._call

    def context(self, case: Case) -> AbstractContextManager[object]:
        return nullcontext()

    def sync(self) -> None:
        return None

    def _leak(self) -> float:
        return self.device_ms + max(0.0, self.host_s * 1000 - self.flush)

    def harness(self, mode: str, warmup_ms: int, rep_ms: int) -> float:
        if mode == "cudagraph":
            raise RuntimeError("no graphs on the fake")
        if mode == "kernel":
            return self._leak()
        return wall_ms(self._call, 20, self.sync)

    def events_ms(self, fn: Fn, calls: int) -> float:
        return wall_ms(fn, calls, self.sync)

    def loop(self, fn: Fn, calls: int, flush: bool, pad_ms: float) -> list[float]:
        hidden = self.flush * flush + pad_ms
        return [self.device_ms + max(0.0, self.host_s * 1000 - hidden)] * calls

    def profile(self, fn: Fn, calls: int) -> dict[str, Any]:
        return {"device_ms": self.device_ms, "kernels": 1.0, "names": {"fake": 1.0}}

    def flush_ms(self) -> float:
        return self.flush

    def tuning(self, case: Case) -> dict[str, str]:
        return {}


class Cuda:
    """FlagGems on a CUDA GPU, with its benchmark harness's own timer. Run from the root of
    a FlagGems tree with it and its `src/` on PYTHONPATH."""

    def __init__(self) -> None:
        start = time.perf_counter()
        import flag_gems

        import_s = time.perf_counter() - start
        import torch
        import triton

        sys.path.insert(0, os.getcwd())
        import benchmark.conftest as conf  # FlagGems' benchmark package, from its tree

        conf.Config = conf.BenchConfig()  # what its pytest_configure would set
        import benchmark.base as base
        from benchmark import consts

        self.torch, self.triton, self.flag_gems = torch, triton, flag_gems
        self.config, self.base, self.consts = conf.Config, base, consts
        driver = triton.runtime.driver.active
        try:  # do_bench's own flush buffer and clear
            self.cache = driver.get_empty_cache_for_benchmark()
            self.clear: Fn = lambda: driver.clear_cache(self.cache)
        except AttributeError:
            self.cache = torch.empty(64 * 1024 * 1024, dtype=torch.int, device="cuda")
            self.clear = self.cache.zero_
        self.bench: Any = None
        self.op: Any = None
        self.args: tuple = ()
        props = torch.cuda.get_device_properties(0)
        self.cycles_per_ms = (getattr(props, "clock_rate", 0) or 1_980_000) * 1.0  # kHz
        self.info = {
            "backend": "cuda",
            "import_flag_gems_s": import_s,
            "device": torch.cuda.get_device_name(),
            "torch": torch.__version__,
            "triton": triton.__version__,
            "flush_bytes": self.cache.numel() * self.cache.element_size(),
            "sm_khz": self.cycles_per_ms,
        }
        self.profile(lambda: torch.ones(1, device="cuda"), 2)  # the profiler's start-up

    def prepare(self, case: Case) -> Fn:
        torch = self.torch
        dtype = getattr(torch, case.dtype)
        aten = torch.ops.aten
        x = torch.randn(case.shape, dtype=dtype, device="cuda")
        if case.op == "bwd3d":  # as FlagGems' benchmark builds them
            out, indices = torch.nn.functional.adaptive_max_pool3d(
                x, output_size=case.out, return_indices=True
            )
            self.op, self.args = aten.adaptive_max_pool3d_backward, (
                torch.ones_like(out), x, indices,
            )  # fmt: skip
        elif case.op == "fwd3d":
            self.op, self.args = aten.adaptive_max_pool3d, (x, list(case.out))
        else:
            self.op, self.args = aten.adaptive_max_pool2d, (x, case.out)
        self.bench = self.base.Benchmark(op_name=case.name, torch_op=self.op)
        op, args = self.op, self.args
        torch.cuda.synchronize()
        return lambda: op(*args)

    def context(self, case: Case) -> AbstractContextManager[object]:
        if case.impl == "gems":  # as the harness times FlagGems' side
            return self.flag_gems.use_gems(exclude=["zero_"])
        return nullcontext()

    def sync(self) -> None:
        self.torch.cuda.synchronize()

    def harness(self, mode: str, warmup_ms: int, rep_ms: int) -> float:
        self.config.mode = self.consts.BenchMode(mode)
        self.config.warm_up, self.config.repetition = warmup_ms, rep_ms
        return float(self.bench.get_latency(self.op, *self.args))

    def events_ms(self, fn: Fn, calls: int) -> float:
        torch = self.torch
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) / calls

    def loop(self, fn: Fn, calls: int, flush: bool, pad_ms: float) -> list[float]:
        torch = self.torch
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
        cycles = int(pad_ms * self.cycles_per_ms)
        torch.cuda.synchronize()
        for i in range(calls):
            if flush:
                self.clear()
            if cycles:
                torch.cuda._sleep(cycles)
            starts[i].record()
            fn()
            ends[i].record()
        torch.cuda.synchronize()
        return [s.elapsed_time(e) for s, e in zip(starts, ends, strict=True)]

    def _profile(self, fn: Fn, calls: int) -> dict[str, Any]:
        torch = self.torch
        from torch.profiler import ProfilerActivity, profile

        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(calls):
                fn()
            torch.cuda.synchronize()
        device = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        names: dict[str, float] = {}
        for e in device:
            names[e.name[:70]] = names.get(e.name[:70], 0.0) + 1 / calls
        return {
            "device_ms": sum(e.time_range.elapsed_us() for e in device) / 1000 / calls,
            "kernels": len(device) / calls,
            "names": dict(sorted(names.items(), key=lambda kv: -kv[1])[:8]),
        }

    def profile(self, fn: Fn, calls: int) -> dict[str, Any]:
        try:
            return self._profile(fn, calls)
        except Exception as exc:
            return {"device_ms": None, "error": f"{type(exc).__name__}: {str(exc)[:200]}"}

    def flush_ms(self) -> float:
        return self.events_ms(self.clear, 50)

    def tuning(self, case: Case) -> dict[str, str]:
        """The configs FlagGems' autotuner chose in this process (key -> config)."""
        names = {
            "bwd3d": ("adaptive_max_pool3d_backward", "adaptive_max_pool3d_backward_kernel"),
            "fwd2d": ("adaptive_max_pool2d", "adaptive_max_pool2d_forward_kernel"),
        }
        if case.impl != "gems" or case.op not in names:
            return {}
        module, kernel = names[case.op]
        fn = getattr(sys.modules.get(f"flag_gems.ops.{module}"), kernel, None)
        while fn is not None and not hasattr(fn, "cache") and hasattr(fn, "fn"):
            fn = fn.fn
        cache = getattr(fn, "cache", None)
        return {str(k)[:120]: str(v) for k, v in cache.items()} if isinstance(cache, dict) else {}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="JSON lines to write")
    parser.add_argument("--repeats", type=int, default=6, help="kernel-mode repeats a case")
    parser.add_argument("--warmup", type=int, default=100, help="their warm-up, ms")
    parser.add_argument("--pad-ms", type=float, default=2.0, help="device spin before a call")
    parser.add_argument("--only", default="", help="comma-separated case names (default all)")
    parser.add_argument("--no-cpus", action="store_true", help="skip the per-CPU scan")
    parser.add_argument("--fake", action="store_true", help="the host-only stand-in")
    args = parser.parse_args(argv)
    wanted = [c for c in CASES if not args.only or c.name in args.only.split(",")]
    started = time.perf_counter()
    b: Backend = Fake() if args.fake else Cuda()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w") as out:

        def emit(record: dict) -> None:
            out.write(json.dumps(record) + "\n")
            out.flush()

        affinity = sorted(os.sched_getaffinity(0))
        emit(
            {
                "kind": "process",
                "pid": os.getpid(),
                "cpu": current_cpu(),
                "affinity": affinity,
                "hash_seed": os.environ.get("PYTHONHASHSEED"),
                "start": datetime.now().isoformat(timespec="milliseconds"),
                "flush_ms": b.flush_ms(),
                "python_ms": python_ms(),
                **b.info,
            }
        )
        for case in wanted:
            row = measure(b, case, args.repeats, args.warmup, args.pad_ms)
            emit(row)
            print(
                f"{case.name:18} kernel {row['kernel_first']:.4f} "
                f"[{min(row['kernel']):.4f}..{max(row['kernel']):.4f}] "
                f"host {median(row['host']):.4f} device {row['profile'].get('device_ms')} "
                f"pad {median(row['loop_pad']):.4f}",
                flush=True,
            )
        if not args.no_cpus and wanted:
            emit(cpu_scan(b, wanted[0], affinity))
        emit(graph_pass(b, wanted, 2))
    print(f"process done in {time.perf_counter() - started:.1f} s", flush=True)


if __name__ == "__main__":
    main()
