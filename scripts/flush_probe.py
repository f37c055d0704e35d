"""How much of a kernel's time is the L2 flush's, on a GPU.

`triton.testing.do_bench` flushes L2 by zeroing a 256 MB buffer before every run, which leaves
L2 full of dirty lines that the timed kernel then has to write back to DRAM. This times a few
kernels three ways: with that flush, with a flush that reads 256 MB (L2 left clean), and with
no flush (warm L2), and prints the medians in microseconds. Run from the repository root:
`PYTHONPATH=. python3 scripts/flush_probe.py` (backward rows) or `... flush_probe.py forward`
(read-heavy rows: global pooling, PyTorch's own per-plane amax, the pair-window forward).
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable
from functools import partial

import torch
import triton.testing

from kernels.ops import adaptive_max_pool3d, adaptive_max_pool3d_backward

FLUSH_BYTES = 256 * 2**20


def median_us(
    fn: Callable[[], object], flush: Callable[[], object] | None, reps: int = 300
) -> float:
    for _ in range(10):
        fn()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        if flush is not None:
            flush()
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    return 1e3 * statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends, strict=True))


def main() -> None:
    buf = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
    flushes: dict[str, Callable[[], object] | None] = {
        "do_bench (zero)": buf.zero_,
        "read": lambda: torch.sum(buf, dtype=torch.int64),
        "none": None,
    }
    cases = forward_cases() if sys.argv[1:] == ["forward"] else backward_cases()
    names = list(flushes)
    print("| case | " + " | ".join(f"{n} µs" for n in names) + " | do_bench µs |")
    print("| --- |" + " ---: |" * (len(names) + 1))
    for label, fn in cases:
        times = [median_us(fn, flush) for flush in flushes.values()]
        ref = 1e3 * triton.testing.do_bench(fn, warmup=10, rep=40, return_mode="median")
        cells = " | ".join(f"{t:.1f}" for t in (*times, ref))
        print(f"| {label} | {cells} |", flush=True)


SHAPE = (8, 64, 16, 56, 56)


def forward_cases() -> list[tuple[str, Callable[[], object]]]:
    cases: list[tuple[str, Callable[[], object]]] = []
    for dtype in (torch.float16, torch.float32):
        x = torch.randn(SHAPE, dtype=dtype, device="cuda")
        planes = x.view(SHAPE[0] * SHAPE[1], -1)
        cases.append((f"{dtype} torch amax per plane", partial(torch.amax, planes, dim=1)))
        for out_size in ((1, 1, 1), (8, 28, 28)):
            ours = partial(adaptive_max_pool3d, x, out_size)
            cases.append((f"{dtype} ours fwd {out_size}", ours))
    return cases


def backward_cases() -> list[tuple[str, Callable[[], object]]]:
    aten = torch.ops.aten.adaptive_max_pool3d_backward
    ours = adaptive_max_pool3d_backward
    cases: list[tuple[str, Callable[[], object]]] = []
    for dtype in (torch.float16, torch.float32):
        x = torch.randn(SHAPE, dtype=dtype, device="cuda")
        zeros = torch.empty_like(x)
        cases.append((f"{dtype} zero_ of the input", zeros.zero_))
        for out_size in ((1, 1, 1), (8, 28, 28), (5, 9, 11)):
            _, idx = torch.ops.aten.adaptive_max_pool3d(x, list(out_size))
            grad = torch.randn(idx.shape, dtype=dtype, device="cuda")
            for who, op in (("torch", aten), ("ours", ours)):
                cases.append((f"{dtype} {who} bwd {out_size}", partial(op, grad, x, idx)))
    return cases


if __name__ == "__main__":
    main()
