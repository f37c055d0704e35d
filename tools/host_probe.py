"""Host time per call of the backward on tiny inputs, ours against PyTorch's, on a GPU.

Times 2000 calls without synchronizing (the queue absorbs them; the host is the limit) and
prints microseconds per call. From the repository root: `python3 -m tools.host_probe`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial

import torch

from kernels import runtime
from kernels.benchmark.sizes import TINY
from kernels.ops._adaptive import signature
from kernels.ops.adaptive_max_pool3d_backward import (
    adaptive_max_pool3d_backward,
    launch_for,
    problem,
)


def per_call_us(fn: Callable[[], object], calls: int = 2000) -> float:
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    elapsed = time.perf_counter() - start
    torch.cuda.synchronize()
    return elapsed / calls * 1e6


def main() -> None:
    aten = torch.ops.aten.adaptive_max_pool3d_backward
    generic = runtime.function("adaptive_max_pool3d_backward", "generic")
    mthreads = runtime.function("adaptive_max_pool3d_backward", "mthreads")
    print("| size | torch µs | generic µs | mthreads µs | generic direct µs |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for shape, out in TINY:
        x = torch.randn(shape, dtype=torch.float16, device="cuda")
        _, idx = torch.ops.aten.adaptive_max_pool3d(x, list(out))
        g = torch.randn(idx.shape, dtype=torch.float16, device="cuda")
        direct = adaptive_max_pool3d_backward
        times = [per_call_us(partial(f, g, x, idx)) for f in (aten, generic, mthreads, direct)]
        print(f"| {shape} → {out} | " + " | ".join(f"{t:.1f}" for t in times) + " |", flush=True)
    # Where one call's host time goes, on the second tiny size.
    shape, out = TINY[1]
    x = torch.randn(shape, dtype=torch.float16, device="cuda")
    _, idx = torch.ops.aten.adaptive_max_pool3d(x, list(out))
    g = torch.randn(idx.shape, dtype=torch.float16, device="cuda")
    p = problem(g, x, idx)
    gin = p.gin
    launch = launch_for(p)
    kernel = launch.kernel[(*launch.grid, 1, 1)[:3]]
    parts = {
        "torch.empty": lambda: torch.empty(shape, dtype=x.dtype, device=x.device),
        "signature": lambda: signature(g, x, idx),
        "Launch (direct after the first)": lambda: launch(g, idx, gin),
        "kernel[grid](...)": lambda: kernel(g, idx, gin, *launch.scalars, **launch.constants),
        "whole op": lambda: adaptive_max_pool3d_backward(g, x, idx),
    }
    for name, fn in parts.items():
        print(f"{name}: {per_call_us(fn):.1f} µs", flush=True)
    print("direct launcher in use:", launch._direct is not None)


if __name__ == "__main__":
    main()
