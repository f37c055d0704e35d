"""One forward call per kernel choice on fp16 (8,64,16,56,56), for ncu to profile.

`python3 scripts/fwd_profile_case.py 5,9,11` runs the default plan, then the window-tile
kernel; under `ncu --clock-control none --metrics ...` the counters say whether a kernel is
bound by memory, by L1/L2 traffic, by issue, or by latency (occupancy).
"""

from __future__ import annotations

import sys

import torch

from kernels.ops._adaptive import max_window
from kernels.ops._forward_tiles import tile_shape
from kernels.ops.adaptive_max_pool3d import adaptive_max_pool3d


def main() -> None:
    out = tuple(int(v) for v in (sys.argv[1] if len(sys.argv) > 1 else "5,9,11").split(","))
    shape = (8, 64, 16, 56, 56)
    torch.manual_seed(0)
    x = torch.randn(shape, dtype=torch.float16, device="cuda")
    windows = tuple(max_window(i, o) for i, o in zip(shape[2:], out, strict=True))
    adaptive_max_pool3d(x, out)
    sides = tile_shape(windows, out, 2048)  # type: ignore[arg-type]
    adaptive_max_pool3d(x, out, config=sides)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
