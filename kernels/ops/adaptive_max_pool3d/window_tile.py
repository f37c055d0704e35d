"""The window_tile kernel of adaptive_max_pool3d: whole windows loaded as coalesced rows.

A program owns BR (plane, od) rows, BOH outputs along H and BOW along W. Per input depth of
its windows it loads a [BR·BOH, BKH, BOW, BKW] tile: for each output, BKH rows of its window
and BKW columns, the last two axes (outputs along W, then the window's columns) running
along memory, so a warp reads contiguous input. It reduces the tile to one (value, position)
per output in registers, then merges that into a running best. Where W divides into windows
of a power-of-two width the columns of consecutive outputs are one contiguous run; the host
then passes strides divided by VEC so the compiler can prove 16-byte alignment and load each
thread's columns as one vector, which also keeps the column reduction inside a thread.

Semantics are PyTorch's, as the other forward kernels keep them: the first maximum in
(d, h, w) order wins a tie, a NaN wins over any number and the last NaN wins among NaNs.
Chunks are merged by flat position, not by visiting order, so any chunking gives the same
answer.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

import triton
import triton.language as tl

from kernels.heuristics import Heuristics
from kernels.launch import Launch
from kernels.ops._adaptive import (
    Forward,
    fits_int32,
    next_pow2,
    span,
    unflatten3,
    vector_width,
    window,
)

NAME = "window_tile"


@triton.jit
def _max_with_nan(a, b):
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def window_tile_kernel(
    x_ptr,
    out_ptr,
    idx_ptr,
    C,
    D,
    H,
    W,
    OD,
    OH,
    OW,
    x_strides,
    KD,
    KH,
    rows,
    n_oh_blocks,
    n_ow_blocks,
    ACC: tl.constexpr,
    BR: tl.constexpr,
    BOH: tl.constexpr,
    BKH: tl.constexpr,
    BOW: tl.constexpr,
    BKW: tl.constexpr,
    W_STEPS: tl.constexpr,
    KWX: tl.constexpr,
    VEC: tl.constexpr,
    WIDE: tl.constexpr,
):
    sxn, sxc, sxd, sxh, sxw = x_strides
    rb, ohb, owb = unflatten3(tl.program_id(0), n_oh_blocks, n_ow_blocks)
    # Axis 0 of the tile: BR (plane, od) rows × BOH outputs along H (BR = 1 on a device).
    r = tl.arange(0, BR * BOH)
    row = rb * BR + r // BOH
    IDX: tl.constexpr = tl.int64 if WIDE else tl.int32
    BIG: tl.constexpr = 2**62 if WIDE else 2**31 - 1
    oh = (ohb * BOH + r % BOH).to(IDX)
    r_ok = (row < rows) & (oh < OH)
    plane = row // OD
    od = (row % OD).to(IDX)
    x_rows = ((plane // C).to(tl.int64) * sxn + (plane % C).to(tl.int64) * sxc) * VEC
    ow = (owb * BOW + tl.arange(0, BOW)).to(IDX)
    d_start, d_end = window(od, D, OD)
    h_start, h_end = window(oh, H, OH)
    if KWX > 0:  # W divides into windows of KWX: the compiler sees the alignment
        w_start = ow * KWX
        w_end = w_start + KWX
    else:
        w_start, w_end = window(ow, W, OW)
    live = r_ok[:, None] & (ow < OW)[None, :]

    kh = tl.arange(0, BKH)
    kw = tl.arange(0, BKW)
    # A lane's place in its window's chunk, in scan order (row-major).
    code = kh[None, :, None, None] * BKW + kw[None, None, None, :]
    best = tl.full([BR * BOH, BOW], float("-inf"), ACC)
    best_idx = tl.full([BR * BOH, BOW], BIG, IDX)
    for kd in range(KD):
        d = d_start + kd
        d_ok = r_ok & (d < d_end)
        d_offs = x_rows + (d * sxd) * VEC
        for h0 in range(0, KH, BKH):
            h = h_start + h0
            hh = h[:, None, None, None] + kh[None, :, None, None]
            h_ok = d_ok[:, None, None, None] & (hh < h_end[:, None, None, None])
            row_offs = d_offs[:, None, None, None] + (hh * sxh) * VEC
            for step in tl.static_range(W_STEPS):
                w = w_start + step * BKW
                ww = w[None, None, :, None] + kw[None, None, None, :]
                ok = h_ok & (ww < w_end[None, None, :, None]) & (ow < OW)[None, None, :, None]
                v = tl.load(x_ptr + (row_offs + ww * sxw), mask=ok, other=float("-inf"))
                v = v.to(ACC)
                # The chunk's maximum per output (a NaN if it holds one), then the first
                # lane that holds it; masked lanes hold -inf and lane 0 is always live.
                m = tl.reduce(tl.reduce(v, 3, _max_with_nan), 1, _max_with_nan)
                hit = tl.where(v == m[:, None, :, None], code, BKH * BKW)
                pos = tl.min(tl.min(hit, axis=3), axis=1)
                m_nan = m != m
                if tl.max(m_nan.to(tl.int32)) > 0:  # rare: the last NaN of the chunk
                    last_nan = tl.max(tl.max(tl.where(v != v, code, -1), axis=3), axis=1)
                    pos = tl.where(m_nan, last_nan, pos)
                flat = (d[:, None] * H + h[:, None] + pos // BKW) * W + w[None, :] + pos % BKW
                chunk_ok = live & d_ok[:, None] & (h < h_end)[:, None] & (w < w_end)[None, :]
                # Merge by position, whatever order the chunks come in.
                best_nan = best != best
                take = tl.where(
                    best_nan,
                    m_nan & (flat > best_idx),
                    m_nan | (m > best) | ((m == best) & (flat < best_idx)),
                )
                take = take & chunk_ok
                best = tl.where(take, m, best)
                best_idx = tl.where(take, flat, best_idx)

    out_offs = row.to(tl.int64)[:, None] * (OH * OW) + (oh[:, None] * OW + ow[None, :]).to(tl.int64)
    tl.store(out_ptr + out_offs, best.to(out_ptr.dtype.element_ty), mask=live)
    tl.store(idx_ptr + out_offs, best_idx.to(tl.int64), mask=live)


@dataclass(frozen=True)
class Config:
    """Sides of the tile: BR rows × (BOH outputs × BKH window rows) × (BOW outputs × BKW
    window columns)."""

    kernel: ClassVar[str] = NAME
    br: int
    boh: int
    bkh: int
    bow: int
    bkw: int
    num_warps: int


def tiles(
    windows: tuple[int, int, int],
    out_dhw: tuple[int, int, int],
    tile: int,
    pack_rows: bool,
    rows: int | None = None,
) -> Config:
    """About `tile` elements per load: whole window columns (up to 128) for as many outputs
    along W as fit in 128 lanes, then window rows, then outputs along H (with `pack_rows`,
    then several (plane, od) rows, up to `rows`); a warp per 512 elements, up to 8."""
    _, kh, kw = windows
    _, oh, ow = out_dhw
    bkw = min(next_pow2(kw), 128)
    bow = min(next_pow2(ow), max(1, 128 // bkw))
    bkh = min(next_pow2(kh), max(1, tile // (bow * bkw)))
    boh = min(next_pow2(oh), max(1, tile // (bow * bkw * bkh)))
    elements = boh * bkh * bow * bkw
    br = max(1, tile // elements) if pack_rows else 1
    br = min(br, next_pow2(rows)) if rows else br
    num_warps = max(1, min(8, elements // 512))
    return Config(br, boh, bkh, bow, bkw, num_warps)


def vectorizes(p: Forward) -> bool:
    """W divides into windows of a power-of-two width of 4 or more, and rows are aligned for
    whole 16-byte vectors: the only case where the kernel beat lane_window on the H200
    (unvectorized, its cross-lane reductions cost more than the loads they save)."""
    x = p.x
    w, ow = x.shape[-1], p.out[2]
    kw = w // ow
    if w % ow or kw < 4 or kw & (kw - 1):
        return False
    return vector_width(x, kw) >= min(kw, 16 // x.element_size())


def default(p: Forward, h: Heuristics) -> Config:
    """About `h.tile_elements` elements a load, `h.tile_warps` warps."""
    rows = p.x.shape[0] * p.x.shape[1] * p.out[0] if h.pack_rows else None
    shape = tiles(p.windows, p.out, h.tile_elements, h.pack_rows, rows)
    return shape if h.tile_warps is None else dataclasses.replace(shape, num_warps=h.tile_warps)


def plan(p: Forward, shape: Config, h: Heuristics) -> Launch:
    """Launch of the window_tile kernel."""
    x, windows = p.x, p.windows
    n, c, d, h_, w = x.shape
    od, oh, ow = p.out
    kwx = w // ow if w % ow == 0 else 0
    w_steps = triton.cdiv(windows[2], shape.bkw)
    vec = vector_width(x, kwx) if kwx == shape.bkw else 1
    n_oh_blocks = triton.cdiv(oh, shape.boh)
    n_ow_blocks = triton.cdiv(ow, shape.bow)
    # Masked lanes may point up to a chunk past a window: keep those offsets in range too.
    reach = span(x.shape[2:], x.stride()[2:]) + (
        shape.bkh * abs(x.stride(3)) + shape.bkw * w_steps * abs(x.stride(4))
    )
    wide = not fits_int32(
        reach,
        (d + 1) * h_ * w,
        (od + 1) * d,
        (oh + shape.boh + 1) * h_,
        (ow + shape.bow + 1) * w,
    )
    rows = n * c * od
    sxn, sxc, sxd, sxh, sxw = x.stride()
    strides = (sxn // vec, sxc // vec, sxd // vec, sxh // vec, sxw)
    scalars = (c, d, h_, w, od, oh, ow, strides, windows[0], windows[1], rows)
    scalars += (n_oh_blocks, n_ow_blocks)
    constants = {
        "ACC": p.acc,
        "BR": shape.br,
        "BOH": shape.boh,
        "BKH": shape.bkh,
        "BOW": shape.bow,
        "BKW": shape.bkw,
        "W_STEPS": w_steps,
        "KWX": kwx,
        "VEC": vec,
        "WIDE": wide,
        "num_warps": shape.num_warps,
    }
    grid = (triton.cdiv(rows, shape.br) * n_oh_blocks * n_ow_blocks,)
    return Launch(window_tile_kernel, grid, scalars, constants)
