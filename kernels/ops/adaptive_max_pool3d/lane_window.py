"""The lane_window kernel of adaptive_max_pool3d: a lane per output walks its small window.

Lanes take consecutive outputs of the flattened (n, c, od, oh, ow) range, so every lane has
one whatever OH and OW are, and each walks its window in scan order: no cross-lane reduction
at all. The walk is kept to a few instructions an element: a lane whose window is shorter than
the largest reads its last row or column again (clamped, not masked), which changes neither
the maximum nor, clamped the same way, the position; the step number of the best element is
tracked and turned into a position once at the end; NaN is tracked apart (the last one wins),
so the compare is a single `>`. Rows of at most UNROLL_W columns are unrolled; whole windows
are not (compile time grows steeply: 17 s at 192 elements).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import triton
import triton.language as tl

from kernels.heuristics import Heuristics
from kernels.launch import Launch
from kernels.ops._adaptive import (
    Forward,
    fits_int32,
    keep_first_max,
    next_pow2,
    unflatten4,
    window,
)
from kernels.ops.adaptive_max_pool3d import chunked

NAME = "lane_window"

# Window rows of at most this many columns are unrolled.
UNROLL_W = 16


@triton.jit
def lane_window_kernel(
    x_ptr,
    out_ptr,
    idx_ptr,
    C,
    D,
    H,
    W,
    HW,
    OD,
    OH,
    OW,
    x_strides,
    total,
    ACC: tl.constexpr,
    BLOCK: tl.constexpr,
    KD: tl.constexpr,
    KH: tl.constexpr,
    KW: tl.constexpr,
    UNROLL_W: tl.constexpr,
    WIDE: tl.constexpr,
):
    """Small windows (at most KD×KH×KW, a few hundred elements): a lane per output."""
    sxn, sxc, sxd, sxh, sxw = x_strides
    IDX: tl.constexpr = tl.int64 if WIDE else tl.int32
    j = tl.program_id(0).to(IDX) * BLOCK + tl.arange(0, BLOCK)
    live = j < total
    plane, od, oh, ow = unflatten4(j, OD, OH, OW)
    x_rows = (plane // C).to(tl.int64) * sxn + (plane % C).to(tl.int64) * sxc
    d_start, d_end = window(od, D, OD)
    h_start, h_end = window(oh, H, OH)
    w_start, w_end = window(ow, W, OW)
    d_last = d_end - 1
    h_last = h_end - 1
    w_last = w_end - 1

    best = tl.full([BLOCK], float("-inf"), ACC)
    best_step = tl.zeros([BLOCK], dtype=tl.int32)  # the first element until one beats it
    nan_step = tl.full([BLOCK], -1, tl.int32)
    for kd in range(KD):
        d_offs = x_rows + tl.minimum(d_start + kd, d_last) * sxd
        for kh in range(KH):
            row_ptr = x_ptr + (d_offs + tl.minimum(h_start + kh, h_last) * sxh)
            row_step = (kd * KH + kh) * KW
            if KW <= UNROLL_W:
                for kw in tl.static_range(KW):
                    w = tl.minimum(w_start + kw, w_last)
                    v = tl.load(row_ptr + w * sxw, mask=live, other=float("-inf")).to(ACC)
                    best, best_step, nan_step = keep_first_max(
                        v, row_step + kw, best, best_step, nan_step
                    )
            else:
                for kw in range(KW):
                    w = tl.minimum(w_start + kw, w_last)
                    v = tl.load(row_ptr + w * sxw, mask=live, other=float("-inf")).to(ACC)
                    best, best_step, nan_step = keep_first_max(
                        v, row_step + kw, best, best_step, nan_step
                    )

    has_nan = nan_step >= 0
    step = tl.where(has_nan, nan_step, best_step)
    d = tl.minimum(d_start + step // (KH * KW), d_last)
    h = tl.minimum(h_start + (step // KW) % KH, h_last)
    w = tl.minimum(w_start + step % KW, w_last)
    value = tl.where(has_nan, float("nan"), best)
    tl.store(out_ptr + j, value.to(out_ptr.dtype.element_ty), mask=live)
    tl.store(idx_ptr + j, (d * HW + h * W + w).to(tl.int64), mask=live)


@dataclass(frozen=True)
class Config:
    """BLOCK consecutive outputs a program, one a lane."""

    kernel: ClassVar[str] = NAME
    block: int
    num_warps: int


def default(p: Forward, h: Heuristics) -> Config:
    """`h.lane_outputs` outputs a program, a warp per 32 of them (up to `h.max_warps`)."""
    block = h.lane_outputs
    if h.trim_blocks:
        x = p.x
        block = min(block, next_pow2(x.shape[0] * x.shape[1] * math.prod(p.out)))
    return Config(block, max(1, min(h.max_warps, block // 32)))


def plan(p: Forward, cfg: Config, h: Heuristics) -> Launch:
    """Launch of the lane_window kernel."""
    x = p.x
    n, c, d, h_, w = x.shape
    od, oh, ow = p.out
    total = n * c * od * oh * ow
    scalars = (c, d, h_, w, h_ * w, od, oh, ow, tuple(x.stride()), total)
    constants = {
        "ACC": p.acc,
        "BLOCK": cfg.block,
        "KD": p.windows[0],
        "KH": p.windows[1],
        "KW": p.windows[2],
        "UNROLL_W": UNROLL_W,
        "WIDE": chunked.wide_offsets(p, h) or not fits_int32(total + cfg.block),
        "num_warps": cfg.num_warps,
    }
    return Launch(lane_window_kernel, (triton.cdiv(total, cfg.block),), scalars, constants)
