"""What the harness's timer reads for next to no work: the floor under the tiny rows.

Times, with the benchmark harness's DeviceTimer (1 GiB flush, median), an empty Triton
kernel, one that copies 64 elements (one dependent load after the flush, one store), and
PyTorch's `zero_` of a 64-element tensor. Prints a Markdown table in microseconds.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.benchmark.harness import DeviceTimer


@triton.jit
def _empty(x_ptr):
    pass


@triton.jit
def _copy64(x_ptr, y_ptr):
    offs = tl.arange(0, 64)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs))


def main() -> None:
    timer = DeviceTimer(warmup_ms=10, rep_ms=40)
    x = torch.randn(64, device="cuda")
    y = torch.empty_like(x)
    cases = {
        "empty Triton kernel": lambda: _empty[(1,)](x),
        "Triton load+store of 64 elements": lambda: _copy64[(1,)](x, y),
        "torch zero_ of 64 elements": lambda: y.zero_(),
        "torch zero_ then copy_ (two launches)": lambda: (y.zero_(), y.copy_(x)),
    }
    print("| case | us |\n| --- | ---: |")
    for name, fn in cases.items():
        fn()
        print(f"| {name} | {timer(fn) * 1e3:.2f} |", flush=True)


if __name__ == "__main__":
    main()
