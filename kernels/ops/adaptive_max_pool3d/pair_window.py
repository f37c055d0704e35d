"""The pair_window kernel of adaptive_max_pool3d: windows two wide along W (W = 2·OW).

Each step loads whole input rows (2·BOW contiguous elements per output row), so every load
instruction uses full memory sectors, and splits them into the even and odd elements in
registers: the two candidates of each window, taken in scan order as lane_window takes them
(no cross-lane reduction); any D and H windows up to KD×KH. The host passes the strides above
W (and W itself as W_vec) divided by VEC, so the compiler can prove each row 16-byte aligned
and load it with vector instructions (Triton only knows an integer argument's divisibility by
16, and W = 56 is not a multiple of 16).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import triton
import triton.language as tl

from kernels.heuristics import Heuristics
from kernels.launch import Launch
from kernels.ops._adaptive import Forward, next_pow2, unflatten3, vector_width, window
from kernels.ops.adaptive_max_pool3d import chunked

NAME = "pair_window"


@triton.jit
def pair_window_kernel(
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
    rows,
    n_oh_blocks,
    n_ow_blocks,
    W_vec,
    ACC: tl.constexpr,
    BR: tl.constexpr,
    BOH: tl.constexpr,
    BOW: tl.constexpr,
    KD: tl.constexpr,
    KH: tl.constexpr,
    VEC: tl.constexpr,
    WIDE: tl.constexpr,
):
    sxn, sxc, sxd, sxh, sxw = x_strides
    rb, ohb, owb = unflatten3(tl.program_id(0), n_oh_blocks, n_ow_blocks)
    row = rb * BR + tl.arange(0, BR)
    row_ok = row < rows
    plane = row // OD
    x_rows = ((plane // C).to(tl.int64) * sxn + (plane % C).to(tl.int64) * sxc) * VEC

    IDX: tl.constexpr = tl.int64 if WIDE else tl.int32
    BIG: tl.constexpr = 2**62 if WIDE else 2**31 - 1
    od = (row % OD).to(IDX)
    oh = (ohb * BOH + tl.arange(0, BOH)).to(IDX)
    ow = (owb * BOW + tl.arange(0, BOW)).to(IDX)
    d_start, d_end = window(od, D, OD)
    h_start, h_end = window(oh, H, OH)
    live = row_ok[:, None, None] & (oh < OH)[None, :, None] & (ow < OW)[None, None, :]
    # The input columns of the tile's windows, contiguous: 2·ow and 2·ow + 1.
    w = (owb * (2 * BOW) + tl.arange(0, 2 * BOW)).to(IDX)
    w_a = 2 * ow
    w_b = w_a + 1

    best = tl.full([BR, BOH, BOW], float("-inf"), ACC)
    best_idx = tl.full([BR, BOH, BOW], BIG, IDX)
    for kd in range(KD):
        d = d_start + kd
        d_ok = row_ok & (d < d_end)
        d_offs = x_rows + (d * sxd) * VEC
        for kh in range(KH):
            h = h_start + kh
            h_ok = (oh < OH) & (h < h_end)
            rows_ok = d_ok[:, None, None] & h_ok[None, :, None]
            ok = rows_ok & (ow < OW)[None, None, :]
            # Whole rows: 2·BOW contiguous columns of each window row.
            offs = (
                d_offs[:, None, None] + ((h * sxh) * VEC)[None, :, None] + (w * sxw)[None, None, :]
            )
            in_row = (w < W_vec * VEC)[None, None, :]
            v = tl.load(x_ptr + offs, mask=rows_ok & in_row, other=float("-inf"))
            a, b = tl.split(tl.reshape(v, (BR, BOH, BOW, 2)))
            base = (d * HW)[:, None, None] + (h * W)[None, :, None]
            # Scan order: `>` keeps the first maximum, a NaN always replaces (the last NaN
            # wins), and a window's first element is always taken (all -inf).
            a = a.to(ACC)
            take = ok & ((a > best) | (a != a) | (best_idx == BIG))
            best = tl.where(take, a, best)
            best_idx = tl.where(take, base + w_a[None, None, :], best_idx)
            b = b.to(ACC)
            take = ok & ((b > best) | (b != b) | (best_idx == BIG))
            best = tl.where(take, b, best)
            best_idx = tl.where(take, base + w_b[None, None, :], best_idx)

    out_offs = row.to(tl.int64)[:, None, None] * (OH * OW) + (
        oh[None, :, None] * OW + ow[None, None, :]
    ).to(tl.int64)
    tl.store(out_ptr + out_offs, best.to(out_ptr.dtype.element_ty), mask=live)
    tl.store(idx_ptr + out_offs, best_idx.to(tl.int64), mask=live)


@dataclass(frozen=True)
class Config:
    """BR (plane, od) rows × BOH×BOW outputs a program."""

    kernel: ClassVar[str] = NAME
    br: int
    boh: int
    bow: int
    num_warps: int


def fits(p: Forward) -> bool:
    """Windows two wide along W: W = 2·OW."""
    return p.x.shape[-1] == 2 * p.out[2]


def tiles(oh: int, ow: int, tile: int, pack_rows: bool, rows: int | None = None) -> Config:
    """Rows of outputs wide along W, about `tile` outputs a program, four a thread (with
    `pack_rows`, several (plane, od) rows a program, up to `rows`)."""
    bow = min(next_pow2(ow), 128)
    boh = min(next_pow2(oh), max(1, tile // bow))
    br = max(1, tile // (bow * boh)) if pack_rows else 1
    br = min(br, next_pow2(rows)) if rows else br
    return Config(br, boh, bow, max(1, min(8, br * boh * bow // 128)))


def default(p: Forward, h: Heuristics) -> Config:
    """`h.pair_outputs` outputs a program, halved (down to 64) while all the outputs would
    give fewer than `h.min_pair_programs` programs."""
    x = p.x
    tile = h.narrow(h.pair_outputs, x.element_size())
    outputs = x.shape[0] * x.shape[1] * p.out[0] * p.out[1] * p.out[2]
    while tile > 64 and outputs < h.min_pair_programs * tile:
        tile //= 2
    rows = chunked.rows(p) if h.pack_rows else None
    return tiles(p.out[1], p.out[2], tile, h.pack_rows, rows)


def plan(p: Forward, cfg: Config, h: Heuristics) -> Launch:
    """Launch of the pair_window kernel."""
    if not fits(p):
        raise ValueError(
            f"the pair_window kernel needs W = 2·OW, got W={p.x.shape[-1]}, OW={p.out[2]}"
        )
    x = p.x
    n, c, d, h_, w = x.shape
    od, oh, ow = p.out
    rows = n * c * od
    n_oh_blocks = triton.cdiv(oh, cfg.boh)
    n_ow_blocks = triton.cdiv(ow, cfg.bow)
    vec = vector_width(x, 2 * cfg.bow)
    sxn, sxc, sxd, sxh, sxw = x.stride()
    strides = (sxn // vec, sxc // vec, sxd // vec, sxh // vec, sxw)
    scalars = (c, d, h_, w, h_ * w, od, oh, ow, strides, rows, n_oh_blocks, n_ow_blocks, w // vec)
    constants = {
        "ACC": p.acc,
        "BR": cfg.br,
        "BOH": cfg.boh,
        "BOW": cfg.bow,
        "KD": p.windows[0],
        "KH": p.windows[1],
        "VEC": vec,
        "WIDE": chunked.wide_offsets(p, h),
        "num_warps": cfg.num_warps,
    }
    grid = (triton.cdiv(rows, cfg.br) * n_oh_blocks * n_ow_blocks,)
    return Launch(pair_window_kernel, grid, scalars, constants)
