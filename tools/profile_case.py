"""Our operator's plan, PyTorch's and the row's mover, once each, for ncu to profile side by
side.

`python3 -m tools.profile_case backward 4,32,32,64,64 10,20,20 float32` (or `forward`)
under `ncu --clock-control none --metrics ...`: the counters of our kernels next to PyTorch's
on the same tensors. A fifth argument replaces the default plan's config, as Python over the
op's package (`tools.sass_count --config` takes the same), e.g.
`"fill_scatter.in_one_box(p, fill_scatter.default(p, current()))"` for the backward, `p`
its problem (a lab tool, not a service).
"""

from __future__ import annotations

import sys

import torch

from kernels.benchmark.bandwidth import backward_split, forward_split
from kernels.benchmark.reach import MoverConfig, mover
from kernels.ops import adaptive_max_pool3d as forward_ops
from kernels.ops import adaptive_max_pool3d_backward as backward_ops
from kernels.ops.adaptive_max_pool3d import adaptive_max_pool3d
from kernels.ops.adaptive_max_pool3d_backward import adaptive_max_pool3d_backward


def main() -> None:
    op = sys.argv[1]
    shape, out = (tuple(int(v) for v in arg.split(",")) for arg in sys.argv[2:4])
    dtype = getattr(torch, sys.argv[4])
    torch.manual_seed(0)
    x = torch.randn(shape, dtype=dtype, device="cuda")
    _, idx = torch.ops.aten.adaptive_max_pool3d(x, list(out))
    config = sys.argv[5] if len(sys.argv) > 5 else None
    if op == "forward":
        cfg = eval(config, dict(vars(forward_ops))) if config else None
        adaptive_max_pool3d(x, out, config=cfg)
        split = forward_split(x.numel(), idx.numel(), x.element_size())
    else:
        grad = torch.randn(idx.shape, dtype=dtype, device="cuda")
        p = backward_ops.problem(grad, x, idx)
        cfg = eval(config, vars(backward_ops) | {"p": p}) if config else None
        adaptive_max_pool3d_backward(grad, x, idx, config=cfg)
        torch.ops.aten.adaptive_max_pool3d_backward(grad, x, idx)
        split = backward_split(x.numel(), idx.numel(), x.element_size())
    # The row's mover (the reach's kernel, one layout): what its memory traffic alone costs.
    mover(split, MoverConfig(8192, 8, False), "cuda")()
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
