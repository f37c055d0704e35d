"""The chunked kernel of adaptive_max_pool3d: windows of any size, reduced chunk by chunk.

Each program owns one (plane, output depth) row (several under the interpreter) and a tile of
BOH×BOW outputs, and reduces their windows in chunks of BKD×BKH×BKW input elements
(power-of-two sides, so splitting a lane number into window coordinates costs shifts, not
divisions); lanes outside an output's own window are masked and read nothing. Each lane keeps
a running maximum over the chunks it visits and the lanes are reduced once at the end, so the
loop body has no cross-thread traffic. The dispatch table's last route: it takes any shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import triton
import triton.language as tl

from kernels.heuristics import Heuristics
from kernels.launch import Launch
from kernels.ops._adaptive import (
    Forward,
    fits_int32,
    merge_lanes,
    next_pow2,
    span,
    unflatten3,
    window,
)

NAME = "chunked"


@triton.jit
def chunked_kernel(
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
    KD,
    KH,
    KW,
    rows,
    n_oh_blocks,
    n_ow_blocks,
    ACC: tl.constexpr,
    BR: tl.constexpr,
    BOH: tl.constexpr,
    BOW: tl.constexpr,
    BKD: tl.constexpr,
    BKH: tl.constexpr,
    BKW: tl.constexpr,
    WIDE: tl.constexpr,
):
    sxn, sxc, sxd, sxh, sxw = x_strides
    # Tile axes: [row = (plane, od), oh, ow, window lane]; BR = 1 on a device.
    rb, ohb, owb = unflatten3(tl.program_id(0), n_oh_blocks, n_ow_blocks)
    row = rb * BR + tl.arange(0, BR)
    row_ok = row < rows
    od = row % OD
    plane = row // OD
    x_rows = (plane // C).to(tl.int64) * sxn + (plane % C).to(tl.int64) * sxc

    # Window coordinates in 32-bit unless an offset within a plane could pass 2^31 (WIDE).
    IDX: tl.constexpr = tl.int64 if WIDE else tl.int32
    BIG: tl.constexpr = 2**62 if WIDE else 2**31 - 1
    # Window bounds: 32-bit division unless o·I could pass 2^31 (a 64-bit one costs far more).
    od = od.to(IDX)
    oh = (ohb * BOH + tl.arange(0, BOH)).to(IDX)
    ow = (owb * BOW + tl.arange(0, BOW)).to(IDX)
    d_start, d_end = window(od, D, OD)
    h_start, h_end = window(oh, H, OH)
    w_start, w_end = window(ow, W, OW)
    live = (
        row_ok[:, None, None, None]
        & (oh < OH)[None, :, None, None]
        & (ow < OW)[None, None, :, None]
    )

    k = tl.arange(0, BKD * BKH * BKW)
    kd = (k // (BKH * BKW)).to(IDX)
    kh = ((k // BKW) % BKH).to(IDX)
    kw = (k % BKW).to(IDX)

    # Each lane keeps its own running maximum across chunks (no cross-lane traffic in the
    # loop); a lane's positions only grow, so `>` keeps its first maximum and any NaN
    # replaces (the last NaN wins). One cross-lane reduction at the end.
    lane_val = tl.full([BR, BOH, BOW, BKD * BKH * BKW], float("-inf"), ACC)
    lane_idx = tl.full([BR, BOH, BOW, BKD * BKH * BKW], BIG, IDX)
    for d0 in range(0, KD, BKD):
        d = d_start[:, None, None, None] + d0 + kd[None, None, None, :]
        d_ok = live & (d < d_end[:, None, None, None])
        row_offs = x_rows[:, None, None, None] + d * sxd
        for h0 in range(0, KH, BKH):
            h = h_start[None, :, None, None] + h0 + kh[None, None, None, :]
            h_ok = d_ok & (h < h_end[None, :, None, None])
            for w0 in range(0, KW, BKW):
                w = w_start[None, None, :, None] + w0 + kw[None, None, None, :]
                mask = h_ok & (w < w_end[None, None, :, None])
                v = tl.load(
                    x_ptr + (row_offs + (h * sxh + w * sxw)), mask=mask, other=float("-inf")
                )
                v = v.to(ACC)
                take = mask & ((v > lane_val) | (v != v) | (lane_idx == BIG))
                lane_val = tl.where(take, v, lane_val)
                lane_idx = tl.where(take, d * HW + h * W + w, lane_idx)

    value, index = merge_lanes(lane_val, lane_idx, BIG, 3)
    index = index.to(tl.int64)
    out_offs = row.to(tl.int64)[:, None, None] * (OH * OW) + (
        oh[None, :, None] * OW + ow[None, None, :]
    ).to(tl.int64)
    store_mask = row_ok[:, None, None] & (oh < OH)[None, :, None] & (ow < OW)[None, None, :]
    tl.store(out_ptr + out_offs, value.to(out_ptr.dtype.element_ty), mask=store_mask)
    tl.store(idx_ptr + out_offs, index, mask=store_mask)


@dataclass(frozen=True)
class Config:
    """BR (plane, od) rows × BOH×BOW outputs a program × a BKD×BKH×BKW chunk a step."""

    kernel: ClassVar[str] = NAME
    br: int
    boh: int
    bow: int
    bkd: int
    bkh: int
    bkw: int
    num_warps: int


def tiles(
    windows: tuple[int, int, int],
    out_dhw: tuple[int, int, int],
    tile: int,
    pack_rows: bool,
    rows: int | None = None,
) -> Config:
    """Tile sides from the largest windows: a chunk of about `tile` elements a step, whole
    windows first along W, then H, then D; the room left goes to outputs (and, with
    `pack_rows`, to several (plane, od) rows a program, up to `rows`)."""
    kd, kh, kw = windows
    bkw = min(next_pow2(kw), 128)
    bkh = min(next_pow2(kh), max(1, tile // bkw))
    bkd = min(next_pow2(kd), max(1, tile // (bkw * bkh)))
    room = max(1, tile // (bkd * bkh * bkw))
    bow = min(next_pow2(out_dhw[2]), room)
    boh = min(next_pow2(out_dhw[1]), max(1, room // bow))
    br = max(1, room // (bow * boh)) if pack_rows else 1
    br = min(br, next_pow2(rows)) if rows else br
    elements = br * boh * bow * bkd * bkh * bkw
    num_warps = max(1, min(8, elements // 256))
    return Config(br, boh, bow, bkd, bkh, bkw, num_warps)


def default(p: Forward, h: Heuristics) -> Config:
    """The device's chunk of `h.chunk_elements`."""
    return tiles(p.windows, p.out, h.chunk_elements, h.pack_rows, rows(p) if h.pack_rows else None)


def rows(p: Forward) -> int:
    """(plane, od) rows of the output."""
    return int(p.x.shape[0] * p.x.shape[1] * p.out[0])


def wide_offsets(p: Forward, h: Heuristics) -> bool:
    """Whether offsets or positions could pass 2^31, with masked lanes up to one default
    chunk past a window: the bound the small-window kernels share (pair_window, lane_window)."""
    x = p.x
    d, h_, w = x.shape[2:]
    od, oh, ow = p.out
    sides = default(p, h)
    reach = span(x.shape[2:], x.stride()[2:]) + (
        sides.bkd * x.stride(2) + sides.bkh * x.stride(3) + sides.bkw * x.stride(4)
    )
    return not fits_int32(
        reach,
        d * h_ * w + sides.bkd * h_ * w,
        (od + 1) * d,
        (oh + sides.boh + 1) * h_,
        (ow + sides.bow + 1) * w,
    )


def plan(p: Forward, cfg: Config, h: Heuristics) -> Launch:
    """Launch of the chunked kernel."""
    x = p.x
    n, c, d, h_, w = x.shape
    od, oh, ow = p.out
    rows = n * c * od
    n_oh_blocks = triton.cdiv(oh, cfg.boh)
    n_ow_blocks = triton.cdiv(ow, cfg.bow)
    # Masked lanes may point up to one chunk past a window: keep those offsets in range too.
    reach = span(x.shape[2:], x.stride()[2:]) + (
        cfg.bkd * x.stride(2) + cfg.bkh * x.stride(3) + cfg.bkw * x.stride(4)
    )
    wide = not fits_int32(
        reach,
        d * h_ * w + cfg.bkd * h_ * w,
        (od + 1) * d,
        (oh + cfg.boh + 1) * h_,
        (ow + cfg.bow + 1) * w,
    )
    scalars = (c, d, h_, w, h_ * w, od, oh, ow, tuple(x.stride()), *p.windows, rows)
    scalars += (n_oh_blocks, n_ow_blocks)
    constants = {
        "ACC": p.acc,
        "BR": cfg.br,
        "BOH": cfg.boh,
        "BOW": cfg.bow,
        "BKD": cfg.bkd,
        "BKH": cfg.bkh,
        "BKW": cfg.bkw,
        "WIDE": wide,
        "num_warps": cfg.num_warps,
    }
    grid = (triton.cdiv(rows, cfg.br) * n_oh_blocks * n_ow_blocks,)
    return Launch(chunked_kernel, grid, scalars, constants)
