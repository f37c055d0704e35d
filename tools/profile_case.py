"""Our operator's default plan and PyTorch's, once each, for ncu to profile side by side.

`python3 -m tools.profile_case backward 4,32,32,64,64 10,20,20 float32` (or `forward`)
under `ncu --clock-control none --metrics ...`: the counters of our kernels next to PyTorch's
on the same tensors.
"""

from __future__ import annotations

import sys

import torch

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
    else:
        grad = torch.randn(idx.shape, dtype=dtype, device="cuda")
        adaptive_max_pool3d_backward(grad, x, idx)
        torch.ops.aten.adaptive_max_pool3d_backward(grad, x, idx)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
