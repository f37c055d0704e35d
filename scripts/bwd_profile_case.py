"""One backward call per variant on fp16 (8,64,16,56,56) -> (5,9,11), for ncu to count.

Run under `ncu --clock-control none -k regex:fill_scatter --metrics ...`: the plane kernel
walking four outputs a thread at a time (the v6 plan), one a thread (fewer registers, more
programs per multiprocessor), and one a thread with 4 depth slices zeroed and scattered a step.
"""

from __future__ import annotations

import sys

import torch

from kernels.ops.adaptive_max_pool3d_backward import BackwardConfig, adaptive_max_pool3d_backward


def main() -> None:
    out = tuple(int(v) for v in (sys.argv[1] if len(sys.argv) > 1 else "5,9,11").split(","))
    dtype = getattr(torch, sys.argv[2] if len(sys.argv) > 2 else "float16")
    torch.manual_seed(0)
    x = torch.randn(8, 64, 16, 56, 56, dtype=dtype, device="cuda")
    _, idx = torch.ops.aten.adaptive_max_pool3d(x, list(out))
    grad = torch.randn(idx.shape, dtype=dtype, device="cuda")
    plane = 16 * 56 * 56
    for box, step in ((1024, 0), (0, 0), (0, 4)):
        cfg = BackwardConfig(
            32,
            64,
            8,
            scatter_first=True,
            zeroed=False,
            scatter_tile=plane,
            scatter_step=step,
            scatter_box=box,
        )
        adaptive_max_pool3d_backward(grad, x, idx, config=cfg)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
