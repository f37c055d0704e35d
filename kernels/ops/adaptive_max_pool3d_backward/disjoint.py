"""The disjoint kernel of adaptive_max_pool3d_backward: every axis divides and the H and W
windows are powers of two, so the windows tile the input disjointly.

A program reads a BOH×BOW tile of outputs once (coalesced, no duplicate gathers), repeats each
value over its KH×KW window in registers, and writes the (BOH·KH)×(BOW·KW) input tile of one
depth slice: one store per element. The host passes the gradient's strides divided by VEC so
the compiler can prove 16-byte alignment and vectorize the stores.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import triton
import triton.language as tl

from kernels.heuristics import Heuristics
from kernels.launch import Launch
from kernels.ops._adaptive import (
    Backward,
    dividing_windows,
    fits_int32,
    next_pow2,
    slice_tile,
    span,
    unflatten4,
    vector_width,
)

NAME = "disjoint"


@triton.jit
def disjoint_kernel(
    grad_ptr,
    idx_ptr,
    gin_ptr,
    C,
    D,
    H,
    W,
    W_vec,
    HW,
    OH,
    OW,
    grad_strides,
    idx_strides,
    son_vec,
    soc_vec,
    sod_vec,
    soh_vec,
    sow,
    n_h_blocks,
    n_w_blocks,
    BOH: tl.constexpr,
    BOW: tl.constexpr,
    KD: tl.constexpr,
    KH: tl.constexpr,
    KW: tl.constexpr,
    VEC: tl.constexpr,
    WIDE: tl.constexpr,
):
    """Every axis divides and KH, KW are powers of two: windows tile the input disjointly.

    A program reads a BOH×BOW tile of outputs once (coalesced, no duplicate gathers), repeats
    each value over its KH×KW window in registers, and writes the (BOH·KH)×(BOW·KW) input
    tile of one depth slice.
    """
    sgn, sgc, sgd, sgh, sgw = grad_strides
    sin, sic, sid, sih, siw = idx_strides
    pid = tl.program_id(0)
    plane, d, hb, wb = unflatten4(pid, D, n_h_blocks, n_w_blocks)
    n = (plane // C).to(tl.int64)
    c = (plane % C).to(tl.int64)
    od = (d // KD).to(tl.int64)

    oh = hb * BOH + tl.arange(0, BOH)
    ow = wb * BOW + tl.arange(0, BOW)
    if WIDE:
        oh = oh.to(tl.int64)
        ow = ow.to(tl.int64)
    out_ok = (oh < OH)[:, None] & (ow < OW)[None, :]
    idx_offs = oh[:, None] * sih + ow[None, :] * siw
    chosen = tl.load(idx_ptr + (n * sin + c * sic + od * sid) + idx_offs, mask=out_ok, other=-1)
    g_offs = oh[:, None] * sgh + ow[None, :] * sgw
    g = tl.load(grad_ptr + (n * sgn + c * sgc + od * sgd) + g_offs, mask=out_ok, other=0.0)

    BH: tl.constexpr = BOH * KH
    BW: tl.constexpr = BOW * KW
    h = hb * BH + tl.arange(0, BH)
    w = wb * BW + tl.arange(0, BW)
    if WIDE:
        h = h.to(tl.int64)
        w = w.to(tl.int64)
    # Flat index of each element, compared with its window's argmax (32-bit unless WIDE).
    here = d.to(h.dtype) * HW + h[:, None] * W + w[None, :]
    chosen = tl.reshape(tl.broadcast_to(chosen[:, None, :, None], (BOH, KH, BOW, KW)), (BH, BW))
    g = tl.reshape(tl.broadcast_to(g[:, None, :, None], (BOH, KH, BOW, KW)), (BH, BW))
    value = tl.where(chosen.to(here.dtype) == here, g, 0.0)
    inside = (h < H)[:, None] & (w < W_vec * VEC)[None, :]
    out_plane = gin_ptr + (n * son_vec + c * soc_vec + d.to(tl.int64) * sod_vec) * VEC
    out_offs = h[:, None] * (soh_vec * VEC) + w[None, :] * sow
    tl.store(out_plane + out_offs, value.to(gin_ptr.dtype.element_ty), mask=inside)


@dataclass(frozen=True)
class Config:
    """About BH×BW elements of one depth slice a program (rounded to whole windows); warps;
    whether the stores are hinted 16-byte aligned."""

    kernel: ClassVar[str] = NAME
    bh: int
    bw: int
    num_warps: int
    vector_stores: bool = True


def windows(p: Backward) -> tuple[int, int, int] | None:
    """(KD, KH, KW) when every axis divides and KH, KW are powers of two, else None."""
    found = dividing_windows(p.in_dhw, p.out_dhw)
    if found is None or any(k & (k - 1) for k in found[1:]):
        return None
    return found


def fits(p: Backward) -> bool:
    return windows(p) is not None


def default(p: Backward, h: Heuristics) -> Config:
    """`h.backward_elements` elements a program, a warp per 256 (up to `h.max_warps`)."""
    _, h_, w = p.in_dhw
    bh, bw = slice_tile(h_, w, h.backward_elements, h.backward_row_width)
    return Config(bh, bw, max(1, min(h.max_warps, bh * bw // 256)))


def plan(p: Backward, cfg: Config, h: Heuristics) -> Launch:
    """Launch of the disjoint kernel: the tile is cfg's, rounded to whole windows."""
    sides = windows(p)
    if sides is None:
        raise ValueError("the disjoint kernel needs every axis to divide, 2^k H and W windows")
    grad5, idx5, gin5 = p.grad, p.idx, p.gin
    n, c, d, h_, w = gin5.shape
    _, oh, ow = p.out_dhw
    kd, kh, kw = sides
    bow = max(1, min(next_pow2(ow), cfg.bw // kw))
    boh = max(1, min(next_pow2(oh), cfg.bh * cfg.bw // (bow * kw * kh)))
    blocks = (triton.cdiv(oh, boh), triton.cdiv(ow, bow))
    vec = vector_width(gin5) if cfg.vector_stores else 1
    reach = max(
        span(t.shape[2:], t.stride()[2:])
        + boh * kh * abs(t.stride(3))
        + bow * kw * abs(t.stride(4))
        for t in (grad5, idx5, gin5)
    )
    wide = not fits_int32(reach, (d + 1) * (h_ + boh * kh) * (w + bow * kw))
    son, soc, sod, soh, sow = gin5.stride()
    grid = (n * c * d * blocks[0] * blocks[1],)
    scalars = (
        c,
        d,
        h_,
        w,
        w // vec,
        h_ * w,
        oh,
        ow,
        grad5.stride(),
        idx5.stride(),
        son // vec,
        soc // vec,
        sod // vec,
        soh // vec,
        sow,
        *blocks,
    )
    constants = {
        "BOH": boh,
        "BOW": bow,
        "KD": kd,
        "KH": kh,
        "KW": kw,
        "VEC": vec,
        "WIDE": wide,
        "num_warps": cfg.num_warps,
    }
    return Launch(disjoint_kernel, grid, scalars, constants)
