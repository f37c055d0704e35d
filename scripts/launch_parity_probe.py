"""Why the harness flushes in two launches every other run: launch parity, on a GPU.

On the H200 a one-kernel op's event time depends on the parity of the kernel launches before
it (0.4–0.5 µs apart on 4 µs kernels; two-kernel ops take one of each, so never change). A
timing loop whose runs each launch the flush and the op once keeps one parity throughout, so
its median is one state or the other, decided by whatever ran before. This prints:

1. A small `zero_` and our tiny backward, timed in loops of 100 runs after j extra
   unflushed calls: the median flips with the parity of j.
2. Every tiny backward case, PyTorch's operator and ours, four timings each with the flush
   in one launch per run (the old timer) and with the harness's DeviceTimer: the range of
   the four medians, and PyTorch's time over ours under the harness's timer.

Run on a GPU from the repository root:
`source scripts/gpu_env.sh && python3 scripts/launch_parity_probe.py`.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from functools import partial
from typing import Any

import torch

from kernels.benchmark.adaptive_max_pool3d_backward import SEED
from kernels.benchmark.harness import DeviceTimer
from kernels.benchmark.sizes import DTYPES, TINY
from kernels.ops.adaptive_max_pool3d_backward import adaptive_max_pool3d_backward

FLUSH_INTS = 2**28  # 1 GiB, as the harness
ATEN = torch.ops.aten.adaptive_max_pool3d_backward.default


def loop_median_us(fn: Callable[[], Any], flush: torch.Tensor, runs: int = 100) -> float:
    """Median of `runs` flushed runs, the flush one launch each (the old timer's loop)."""
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(runs)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(runs)]
    for first, last in zip(starts, ends, strict=True):
        flush.zero_()
        first.record()
        fn()
        last.record()
    torch.cuda.synchronize()
    return 1e3 * statistics.median(a.elapsed_time(b) for a, b in zip(starts, ends, strict=True))


def case(shape: tuple[int, ...], out: tuple[int, int, int], dtype: torch.dtype) -> tuple[Any, ...]:
    """(grad, input, indices) as the benchmark prepares them."""
    torch.manual_seed(SEED)
    x = torch.randn(shape, dtype=dtype, device="cuda")
    _, idx = torch.ops.aten.adaptive_max_pool3d.default(x, list(out))
    return torch.randn(idx.shape, dtype=dtype, device="cuda"), x, idx


def span(values: list[float]) -> str:
    return f"{min(values):.2f}–{max(values):.2f}"


def main() -> None:
    flush = torch.empty(FLUSH_INTS, dtype=torch.int32, device="cuda")
    grad, x, idx = case(*TINY[1], torch.float16)
    small = torch.empty_like(x)
    print("| op | loop medians (µs) after j extra unflushed calls, +j:median |\n| --- | --- |")
    for name, fn in (
        ("zero_ of 24K fp16", small.zero_),
        ("ours, fp16 (2,3,16,16,16)", partial(adaptive_max_pool3d_backward, grad, x, idx)),
    ):
        fn()
        torch.cuda.synchronize()
        cells = []
        for j in (0, 0, 1, 0, 1, 1, 2, 0, 3, 0):
            for _ in range(j):
                fn()
            cells.append(f"+{j}:{loop_median_us(fn, flush):.2f}")
        print(f"| {name} | " + " ".join(cells) + " |", flush=True)

    def old_timer(fn: Callable[[], Any]) -> float:
        fn()
        for _ in range(20):
            fn()
        return loop_median_us(fn, flush, runs=300)

    timer = DeviceTimer(warmup_ms=10, rep_ms=60)
    print(
        "\n| case | torch, old timer | ours, old timer | torch, harness | ours, harness "
        "| torch/ours, harness |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for dtype_name in ("float16", "float32", "bfloat16"):
        for shape, out in TINY:
            grad, x, idx = case(shape, out, DTYPES[dtype_name])
            ref = partial(ATEN, grad, x, idx)
            ours = partial(adaptive_max_pool3d_backward, grad, x, idx)
            old = {f: [old_timer(f) for _ in range(4)] for f in (ref, ours)}
            new = {f: [timer(f) * 1e3 for _ in range(4)] for f in (ref, ours)}
            ratio = statistics.median(new[ref]) / statistics.median(new[ours])
            cells = [
                span(old[ref]),
                span(old[ours]),
                span(new[ref]),
                span(new[ours]),
                f"{ratio:.2f}",
            ]
            print(f"| {dtype_name} {shape} → {out} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
