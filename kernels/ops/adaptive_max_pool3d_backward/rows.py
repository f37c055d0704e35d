"""The rows kernel of adaptive_max_pool3d_backward: any windows, for steep upsampling.

A program owns BR rows of BW elements of one depth slice. The depth is a scalar, so its
candidate outputs are runtime loop bounds (one, two only where windows overlap) instead of
masked iterations; rows go in groups of RG whose candidate output rows also bound a runtime
loop, read from a per-row table (no division). Only W keeps a static loop of CW masked
candidates, whose loads hit one or two cache lines per warp. fp32 accumulation in a fixed
order, one store per element. The dispatch table's last route: where an element has more
candidate outputs than the scatters take.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
import triton
import triton.language as tl

from kernels.heuristics import Heuristics
from kernels.launch import Launch
from kernels.ops._adaptive import (
    Backward,
    covering_bounds,
    fits_int32,
    max_window,
    next_pow2,
    slice_tile,
    span,
    unflatten4,
)

NAME = "rows"


@triton.jit
def _axis_range(p, in_size, out_size, K: tl.constexpr, WIDE: tl.constexpr):
    """First output covering p and one past the last (K > 0: windows of K, one output)."""
    if K > 0:
        first = p // K
        last = first + 1
    elif WIDE:
        p64 = p.to(tl.int64)
        first = ((p64 * out_size) // in_size).to(p.dtype)
        last = (((p64 + 1) * out_size + in_size - 1) // in_size).to(p.dtype)
    else:
        first = (p * out_size) // in_size
        last = ((p + 1) * out_size + in_size - 1) // in_size
    return first, last


@triton.jit
def rows_kernel(
    grad_ptr,
    idx_ptr,
    gin_ptr,
    h_bounds_ptr,
    C,
    D,
    H,
    W,
    HW,
    OD,
    OW,
    grad_strides,
    idx_strides,
    son,
    soc,
    sod,
    soh,
    sow,
    n_h_blocks,
    n_w_blocks,
    ACC: tl.constexpr,
    BR: tl.constexpr,
    RG: tl.constexpr,
    BW: tl.constexpr,
    CW: tl.constexpr,
    KD: tl.constexpr,
    KW: tl.constexpr,
    WIDE: tl.constexpr,
    AXIS_WIDE: tl.constexpr,
):
    """Any window sizes: a program owns BR rows of BW elements of one depth slice.

    The depth is a scalar, so its candidate outputs are runtime loop bounds (one, two only
    where windows overlap) instead of masked iterations; rows go in groups of RG whose
    candidate output rows also bound a runtime loop, read from a per-row table (no division).
    Only W keeps a static loop of CW masked candidates, whose loads hit one or two cache
    lines per warp. fp32 accumulation in a fixed order, one store per element.
    """
    sgn, sgc, sgd, sgh, sgw = grad_strides
    sin, sic, sid, sih, siw = idx_strides
    pid = tl.program_id(0)
    plane, d, hb, wb = unflatten4(pid, D, n_h_blocks, n_w_blocks)
    n = (plane // C).to(tl.int64)
    c = (plane % C).to(tl.int64)
    od_first, od_last = _axis_range(d, D, OD, KD, AXIS_WIDE)

    w = wb * BW + tl.arange(0, BW)
    if WIDE:
        w = w.to(tl.int64)
    w_ok = w < W
    ow_first, ow_last = _axis_range(w, W, OW, KW, AXIS_WIDE)
    grad_plane = grad_ptr + (n * sgn + c * sgc)
    idx_plane = idx_ptr + (n * sin + c * sic)
    out_slice = gin_ptr + (n * son + c * soc + d.to(tl.int64) * sod)
    zero = d * 0
    if WIDE:
        zero = zero.to(tl.int64)
    for r in range(0, BR, RG):
        # A group of RG rows: their candidate output rows run from the first row's first to
        # the last row's last (bounds are monotonic in h); each row masks the others'.
        h = hb * BR + r + tl.arange(0, RG)
        rows = tl.minimum(h, H - 1)
        oh_first = tl.load(h_bounds_ptr + rows)
        oh_last = tl.load(h_bounds_ptr + H + rows)
        top = tl.minimum(hb * BR + r, H - 1)
        bottom = tl.minimum(hb * BR + r + RG - 1, H - 1)
        oh_lo = tl.load(h_bounds_ptr + top)
        oh_hi = tl.load(h_bounds_ptr + H + bottom)
        if WIDE:
            h = h.to(tl.int64)
        here = d.to(w.dtype) * HW + h[:, None] * W + w[None, :]
        inside = (h < H)[:, None] & w_ok[None, :]
        acc = tl.zeros([RG, BW], dtype=ACC)
        for od in range(od_first, od_last):
            for oh in range(oh_lo, oh_hi):
                row_ok = inside & ((oh >= oh_first) & (oh < oh_last))[:, None]
                # Loop counters are plain ints under the interpreter: widen by adding a zero.
                od_ = od + zero
                oh_ = oh + zero
                g_row = grad_plane + (od_ * sgd + oh_ * sgh)
                i_row = idx_plane + (od_ * sid + oh_ * sih)
                for k in tl.static_range(CW):
                    ow = ow_first + k
                    ok = row_ok & (ow < ow_last)[None, :]
                    i_offs = tl.broadcast_to((ow * siw)[None, :], (RG, BW))
                    g_offs = tl.broadcast_to((ow * sgw)[None, :], (RG, BW))
                    chosen = tl.load(i_row + i_offs, mask=ok, other=-1).to(here.dtype)
                    g = tl.load(g_row + g_offs, mask=ok, other=0.0)
                    acc += tl.where(chosen == here, g.to(ACC), 0.0)
        out_offs = h[:, None] * soh + w[None, :] * sow
        tl.store(out_slice + out_offs, acc.to(gin_ptr.dtype.element_ty), mask=inside)


@dataclass(frozen=True)
class Config:
    """About BH×BW elements of one depth slice a program, BW along W."""

    kernel: ClassVar[str] = NAME
    bh: int
    bw: int


def default(p: Backward, h: Heuristics) -> Config:
    """`h.backward_elements` elements a program."""
    _, h_, w = p.in_dhw
    return Config(*slice_tile(h_, w, h.backward_elements, h.backward_row_width))


def row_bounds(in_size: int, out_size: int, device: torch.device) -> torch.Tensor:
    """First outputs covering each input position, then one past the last ones (int32)."""
    return torch.cat(covering_bounds(in_size, out_size)).to(device=device, dtype=torch.int32)


def plan(p: Backward, cfg: Config, h: Heuristics) -> Launch:
    """Launch of the rows kernel: BR rows of BW elements of one depth slice a program."""
    grad5, idx5, gin5 = p.grad, p.idx, p.gin
    n, c, d, h_, w = gin5.shape
    od, oh, ow = p.out_dhw
    bw = min(next_pow2(w), cfg.bw)
    # Groups of 4 rows keep several rows' loads in flight per warp (a single row per loop
    # iteration would wait on memory once per row); fewer when rows are short of windows.
    rg = min(4, next_pow2(h_))
    # BR bounds a loop, not a block: whole groups up to the plane's rows, no masked tail.
    br = max(rg, min(triton.cdiv(h_, rg) * rg, cfg.bh * cfg.bw // bw // rg * rg))
    blocks = (triton.cdiv(h_, br), triton.cdiv(w, bw))
    reach = max(
        span(t.shape[2:], t.stride()[2:]) + bw * abs(t.stride(4)) for t in (grad5, idx5, gin5)
    )
    wide = not fits_int32(reach, (d + 1) * h_ * (w + bw))
    axis_wide = not fits_int32((d + 1) * od, (w + bw + 1) * ow)
    grid = (n * c * d * blocks[0] * blocks[1],)
    scalars = (
        row_bounds(h_, oh, gin5.device),
        c,
        d,
        h_,
        w,
        h_ * w,
        od,
        ow,
        grad5.stride(),
        idx5.stride(),
        *gin5.stride(),
        *blocks,
    )
    constants = {
        "ACC": p.acc,
        "BR": br,
        "RG": rg,
        "BW": bw,
        "CW": max_window(ow, w),
        "KD": d // od if d % od == 0 else 0,
        "KW": w // ow if w % ow == 0 else 0,
        "WIDE": wide,
        "AXIS_WIDE": axis_wide,
        "num_warps": max(1, min(4, rg * bw // 256)),
    }
    return Launch(rows_kernel, grid, scalars, constants)
