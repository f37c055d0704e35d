"""Our operator's default plan, PyTorch's and the row's mover, once each, for ncu to profile
side by side.

`python3 -m tools.profile_case backward 4,32,32,64,64 10,20,20 float32` (or `forward`)
under `ncu --clock-control none --metrics ...`: the counters of our kernels next to PyTorch's
on the same tensors.
"""

from __future__ import annotations

import sys

import torch

from kernels.benchmark.bandwidth import backward_split, forward_split
from kernels.benchmark.reach import MoverConfig, mover
from kernels.ops.adaptive_max_pool3d import adaptive_max_pool3d
from kernels.ops.adaptive_max_pool3d_backward import adaptive_max_pool3d_backward


def main() -> None:
    op = sys.argv[1]
    shape, out = (tuple(int(v) for v in arg.split(",")) for arg in sys.argv[2:4])
    dtype = getattr(torch, sys.argv[4])
    torch.manual_seed(0)
    x = torch.randn(shape, dtype=dtype, device="cuda")
    _, idx = torch.ops.aten.adaptive_max_pool3d(x, list(out))
    if op == "forward":
        adaptive_max_pool3d(x, out)
        split = forward_split(x.numel(), idx.numel(), x.element_size())
    else:
        grad = torch.randn(idx.shape, dtype=dtype, device="cuda")
        adaptive_max_pool3d_backward(grad, x, idx)
        torch.ops.aten.adaptive_max_pool3d_backward(grad, x, idx)
        split = backward_split(x.numel(), idx.numel(), x.element_size())
    # The row's mover (the reach's kernel, one layout): what its memory traffic alone costs.
    mover(split, MoverConfig(8192, 8, False), "cuda")()
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
