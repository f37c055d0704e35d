"""The zeroed_scatter kernel of adaptive_max_pool3d_backward: the host zeroes the gradient,
then a lane per output stores its gradient at its argmax (two launches).

For windows that overlap on several axes where planes are too few for a program each: a
fill_scatter tile's outputs would then be shared with its neighbours' tiles, while here every
output is read once and the lanes are independent, so the memory latency of the candidate
checks overlaps across the whole device instead of queueing inside a tile. Overlapping
windows are summed once (`_scatter.sum_once`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
import triton
import triton.language as tl

from kernels.heuristics import Heuristics
from kernels.launch import Launch
from kernels.ops._adaptive import Backward, fits_int32, next_pow2, span, unflatten4
from kernels.ops.adaptive_max_pool3d_backward._scatter import (
    bounds_table,
    divisors_of,
    fits_axes,
    sum_once,
)

NAME = "zeroed_scatter"


@triton.jit
def zeroed_scatter_kernel(
    grad_ptr,
    idx_ptr,
    gin_ptr,
    bounds_ptr,
    C,
    D,
    H,
    W,
    OD,
    OH,
    OW,
    grad_strides,
    idx_strides,
    total,
    ACC: tl.constexpr,
    BLOCK: tl.constexpr,
    CD: tl.constexpr,
    CH: tl.constexpr,
    CW: tl.constexpr,
    WIDE: tl.constexpr,
):
    """The scatter alone, a lane per output, into a gradient the host has zeroed.

    For windows that overlap, where a tile's outputs are shared with its neighbours' tiles:
    every output is read once and the lanes are independent, so the memory latency of the
    candidate checks overlaps across the whole device instead of queueing inside a tile.
    """
    sgn, sgc, sgd, sgh, sgw = grad_strides
    sin, sic, sid, sih, siw = idx_strides
    j = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if WIDE:
        j = j.to(tl.int64)
    ok = j < total
    plane, od, oh, ow = unflatten4(j, OD, OH, OW)
    n = plane // C
    c = plane % C
    idx_base = idx_ptr + (n * sin + c * sic)
    grad_base = grad_ptr + (n * sgn + c * sgc)
    chosen = tl.load(idx_base + (od * sid + oh * sih + ow * siw), mask=ok, other=-1).to(j.dtype)
    g = tl.load(grad_base + (od * sgd + oh * sgh + ow * sgw), mask=ok, other=0.0)
    mine = ok & (chosen >= 0) & (chosen < D * H * W)
    divisors = divisors_of(bounds_ptr, D, H, W, OD, OH, OW)
    value, writer = sum_once(
        idx_base, grad_base, bounds_ptr, divisors, chosen, g, mine, od, oh, ow,
        D, H, W, sid, sih, siw, sgd, sgh, sgw, ACC, CD, CH, CW, WIDE,
    )  # fmt: skip
    gin = gin_ptr + plane * D * H * W
    tl.store(gin + chosen, value.to(gin_ptr.dtype.element_ty), mask=writer)


@dataclass(frozen=True)
class Config:
    """Outputs a program, one a lane; warps."""

    kernel: ClassVar[str] = NAME
    block: int
    num_warps: int


def tiles(block: int) -> Config:
    """`block` outputs a program, a warp per 128 (up to 8)."""
    return Config(block, max(1, min(8, block // 128)))


def default(p: Backward, h: Heuristics) -> Config:
    """`h.zeroed_block` outputs a program."""
    block = h.zeroed_block
    if h.trim_blocks:
        block = min(block, next_pow2(p.grad.numel()))
    return tiles(block)


class ZeroedLaunch:
    """The kernel's two steps: zero the gradient (the third tensor), then launch."""

    def __init__(self, launch: Launch) -> None:
        self.launch = launch
        self.kernel = launch.kernel

    @property
    def path(self) -> str:
        """How the kernel launches now (`Launch.path`)."""
        return self.launch.path

    def __call__(self, *tensors: torch.Tensor) -> None:
        tensors[2].zero_()
        self.launch(*tensors)


def plan(p: Backward, cfg: Config, h: Heuristics) -> ZeroedLaunch:
    """Zero fill, then the kernel (the gradient must be contiguous)."""
    grad5, idx5, gin5 = p.grad, p.idx, p.gin
    n, c, d, h_, w = gin5.shape
    od, oh, ow = p.out_dhw
    assert gin5.is_contiguous(), "the scatter writes flat offsets into a contiguous gradient"
    total = n * c * od * oh * ow
    block = cfg.block
    reach = max(span(t.shape, t.stride()) for t in (grad5, idx5))
    wide = not (
        fits_int32(reach, total + block, gin5.numel()) and fits_axes((d, h_, w), (od, oh, ow))
    )
    scalars = (
        bounds_table((d, h_, w), (od, oh, ow), gin5.device),
        c,
        d,
        h_,
        w,
        od,
        oh,
        ow,
        grad5.stride(),
        idx5.stride(),
        total,
    )
    cd, ch, cw = p.candidates
    constants = {
        "ACC": p.acc,
        "BLOCK": block,
        "CD": cd,
        "CH": ch,
        "CW": cw,
        "WIDE": wide,
        "num_warps": cfg.num_warps,
    }
    grid = (triton.cdiv(total, block),)
    return ZeroedLaunch(Launch(zeroed_scatter_kernel, grid, scalars, constants))
