"""adaptive_max_pool3d: the generic Triton kernels (values and int64 argmax indices).

The plan picks, in order: the split reduction for global pooling of contiguous planes
(`_forward_global.py`); for windows of at most SMALL_WINDOW elements, the whole-row kernel
where windows are two wide along W, the column-maxima kernel where rows of up to 256 columns
meet windows of at least MIN_COLUMN_ROWS (D, H) rows, at most 16 along H
(`_forward_columns.py`), the window-tile kernel where windows of at least MIN_TILE_WINDOW
elements divide W into aligned power-of-two widths of 4 or more (`_forward_tiles.py`), else
the lane-per-window kernel; larger windows the chunked kernel. The loops of every kernel run
over the largest window of each axis, which the host computes, so they are bounded.

The chunked kernel: each program owns one (plane, output depth) row (several under the
interpreter) and a tile of BOH×BOW outputs, and reduces their windows in chunks of
BKD×BKH×BKW input elements (power-of-two sides, so splitting a lane number into window
coordinates costs shifts, not divisions); lanes outside an output's own window are masked
and read nothing. Each lane keeps a running maximum over the chunks it visits and the lanes
are reduced once at the end, so the loop body has no cross-thread traffic.

Semantics are PyTorch's: the index is the flat offset in the D·H·W volume, the first maximum
wins a tie (smallest offset, PyTorch scans d, h, w in order), and a NaN wins over any number
(the last NaN in scan order, as PyTorch's CPU kernel keeps it). Comparisons run in fp32
(fp64 for fp64 input), which is exact for every input dtype.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from kernels import runtime
from kernels.launch import Launch
from kernels.ops._adaptive import (
    PlanCache,
    Spatial,
    as_5d,
    check_input,
    fits_int32,
    max_window,
    next_pow2,
    output_size3,
    signature,
    span,
    vector_width,
)
from kernels.ops._forward_columns import ColumnRows, column_rows, plan_column_rows
from kernels.ops._forward_columns import applies as columns_apply
from kernels.ops._forward_global import GlobalLaunch, GlobalSplit, plan_global
from kernels.ops._forward_global import applies as global_pooling
from kernels.ops._forward_tiles import (
    TileShape,
    default_tile_shape,
    plan_window_tiles,
    vector_tiles,
)
from kernels.ops._jit_helpers import (
    keep_first_max,
    merge_lanes,
    unflatten3,
    unflatten4,
    window,
)


@triton.jit
def _adaptive_max_pool3d_kernel(
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
    sxn,
    sxc,
    sxd,
    sxh,
    sxw,
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


# Window rows of at most this many columns are unrolled in the lane-per-window kernel.
UNROLL_W = 16


@triton.jit
def _small_window_kernel(
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
    sxn,
    sxc,
    sxd,
    sxh,
    sxw,
    total,
    ACC: tl.constexpr,
    BLOCK: tl.constexpr,
    KD: tl.constexpr,
    KH: tl.constexpr,
    KW: tl.constexpr,
    UNROLL_W: tl.constexpr,
    WIDE: tl.constexpr,
):
    """Small windows (at most KD×KH×KW, a few hundred elements): a lane per output walks its
    window in scan order, so no cross-lane reduction at all. Lanes take consecutive outputs
    of the flattened (n, c, od, oh, ow) range, so every lane has one whatever OH and OW are.

    The walk is kept to a few instructions an element: a lane whose window is shorter than
    the largest reads its last row or column again (clamped, not masked), which changes
    neither the maximum nor, clamped the same way, the position; the step number of the best
    element is tracked and turned into a position once at the end; NaN is tracked apart (the
    last one wins), so the compare is a single `>`. Rows of at most UNROLL_W columns are
    unrolled; whole windows are not (compile time grows steeply: 17 s at 192 elements).
    """
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


@triton.jit
def _pair_window_kernel(
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
    sxn,
    sxc,
    sxd,
    sxh,
    sxw,
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
    """Windows two wide along W (W = 2·OW), any D and H windows up to KD×KH.

    The host passes the strides above W (and W itself as W_vec) divided by VEC, so the
    compiler can prove each row 16-byte aligned and load it with vector instructions (Triton
    only knows an integer argument's divisibility by 16, and W = 56 is not a multiple of 16).

    Each step loads whole input rows (2·BOW contiguous elements per output row), so every
    load instruction uses full memory sectors, and splits them into the even and odd
    elements in registers: the two candidates of each window, taken in scan order as the
    small-window kernel takes them (no cross-lane reduction).
    """
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


# The whole-row kernel's tiles shrink until a launch has this many programs (H200 sweep:
# fp32 (1,1,32,32,32) -> (16,16,16), 16 programs of 256 outputs, 1.37x PyTorch; 64 of 64,
# 2.10x; the other tiny rows level within 0.02).
MIN_PAIR_PROGRAMS = 128
# Windows of at most this many elements take a small-window kernel (H200 sweep: it beat the
# chunked kernel 2.4x at 125-element windows); larger ones the chunked kernel.
SMALL_WINDOW = 512
# Windows of fewer (D·H) rows leave the column-maxima kernel's final gather most of the work:
# (8,64,16,56,56) -> (16,28,20), 2 rows, took 4.7x the floor in fp16 against the lane
# kernel's 2.9x; (8,50,50), 4 rows, 4.4x against 5.3x (H200 sweep, `--case`).
MIN_COLUMN_ROWS = 4
# Where the column kernel does not apply (H windows past 16 rows), the window-tile kernel
# beats the lane kernel on large windows only (H200 `--case` sweep, fp16, x the floor):
# (8,64,16,64,64) -> (4,2,16), 512 elements, 3.18 against 4.80; (8,64,16,96,64) -> (8,4,16),
# 192 elements, 3.32 against 2.04.
MIN_TILE_WINDOW = 256


@dataclass(frozen=True)
class ChunkTiles:
    """The chunked kernel: BR (plane, od) rows × BOH×BOW outputs × a BKD×BKH×BKW chunk."""

    br: int
    boh: int
    bow: int
    bkd: int
    bkh: int
    bkw: int
    num_warps: int


@dataclass(frozen=True)
class PairTiles:
    """The whole-row kernel (windows two wide along W): BR rows × BOH×BOW outputs."""

    br: int
    boh: int
    bow: int
    num_warps: int


@dataclass(frozen=True)
class LaneBlock:
    """The lane-per-window kernel: BLOCK consecutive outputs a program, one a lane."""

    block: int
    num_warps: int


# A config names its kernel: the plan launches the one its type belongs to.
ForwardConfig = ChunkTiles | PairTiles | LaneBlock | TileShape | GlobalSplit | ColumnRows


def pair_tiles(
    oh: int, ow: int, tile: int | None = None, element_size: int = 4, outputs: int | None = None
) -> PairTiles:
    """Rows of outputs wide along W, four a thread. H200 sweep: 1024 outputs a program in
    2-byte dtypes, 512 in fp32 (more rows a program under the interpreter); on a device,
    halved down to 64 while `outputs` (all of them, when given) would give fewer than
    MIN_PAIR_PROGRAMS programs."""
    if not tile:
        tile = 16384 if runtime.interpreted else 1024 if element_size <= 2 else 512
        if outputs is not None and not runtime.interpreted:
            while tile > 64 and outputs < MIN_PAIR_PROGRAMS * tile:
                tile //= 2
    bow = min(next_pow2(ow), 128)
    boh = min(next_pow2(oh), max(1, tile // bow))
    br = max(1, tile // (bow * boh)) if runtime.interpreted else 1
    return PairTiles(br, boh, bow, max(1, min(8, br * boh * bow // 128)))


def lane_block(tile: int | None = None) -> LaneBlock:
    """A flat range of outputs, one a thread. H200 sweep: 256 a program (more warps in
    flight per window element they wait on than four a thread)."""
    tile = tile or (16384 if runtime.interpreted else 256)
    return LaneBlock(tile, 1 if runtime.interpreted else max(1, min(8, tile // 32)))


def chunk_tiles(
    windows: tuple[int, int, int], out_dhw: tuple[int, int, int], tile: int | None = None
) -> ChunkTiles:
    """Pick tile sides from the largest windows: a chunk of about `tile` elements per step.

    Under the interpreter, where each program costs Python time whatever its size, a program
    also takes several (plane, od) rows; on a device it takes one.
    """
    tile = tile or (32768 if runtime.interpreted else 2048)
    kd, kh, kw = windows
    bkw = min(next_pow2(kw), 128)
    bkh = min(next_pow2(kh), max(1, tile // bkw))
    bkd = min(next_pow2(kd), max(1, tile // (bkw * bkh)))
    room = max(1, tile // (bkd * bkh * bkw))
    bow = min(next_pow2(out_dhw[2]), room)
    boh = min(next_pow2(out_dhw[1]), max(1, room // bow))
    br = max(1, room // (bow * boh)) if runtime.interpreted else 1
    elements = br * boh * bow * bkd * bkh * bkw
    num_warps = max(1, min(8, elements // 256))
    return ChunkTiles(br, boh, bow, bkd, bkh, bkw, num_warps)


def default_config(
    x: torch.Tensor, out_dhw: tuple[int, int, int], windows: tuple[int, int, int]
) -> ForwardConfig:
    """The kernel (and its tiles) for the 5-D input `x`, in the order the module docstring
    gives. Under the interpreter the lane-per-window and whole-row kernels loop in Python per
    window element, so only windows of up to 32 elements take them there."""
    if global_pooling(x, out_dhw):
        return GlobalSplit()
    elements = math.prod(windows)
    lanes_limit = 32 if runtime.interpreted else SMALL_WINDOW
    w, ow = x.shape[-1], out_dhw[2]
    if elements <= lanes_limit and w == 2 * ow:
        outputs = x.shape[0] * x.shape[1] * math.prod(out_dhw)
        return pair_tiles(out_dhw[1], ow, element_size=x.element_size(), outputs=outputs)
    rows = windows[0] * windows[1]
    if elements <= SMALL_WINDOW and rows >= MIN_COLUMN_ROWS and columns_apply(w, ow, windows):
        return column_rows(w, x.element_size(), rows)
    if MIN_TILE_WINDOW <= elements <= SMALL_WINDOW and vector_tiles(x, windows, out_dhw):
        return default_tile_shape(windows, out_dhw)
    if elements <= lanes_limit:
        return lane_block()
    return chunk_tiles(windows, out_dhw)


_PLANS = PlanCache()


def adaptive_max_pool3d(
    input: torch.Tensor,
    output_size: int | Sequence[int | None],
    *,
    config: ForwardConfig | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Adaptive 3-D max pooling of a 4-D (C,D,H,W) or 5-D (N,C,D,H,W) tensor of any strides.

    Returns (values, int64 indices), both contiguous, shaped like PyTorch's. `config` (for
    tuning and tests) overrides the plan's choice: its type names the kernel, its fields the
    tiles.
    """
    try:
        sizes = output_size if isinstance(output_size, int) else tuple(output_size)
        key: tuple[object, ...] | None = (signature(input), sizes, config)
        hash(key)
    except (AttributeError, TypeError):  # not a tensor, or odd sizes: the checks say so
        key = None
    plan = _PLANS.get(key)
    if plan is None:
        check_input(input)
        plan = plan_forward(input, output_size3(output_size, input), config)
        _PLANS.put(key, plan)
    return plan(input)


def plan_forward(
    input: torch.Tensor, output_size: tuple[int, int, int], config: ForwardConfig | None
) -> Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]:
    """A launcher for inputs like this one: plan(input) -> (values, indices)."""
    x = as_5d(input)
    shape = (*input.shape[:-3], *output_size)
    dtype, device = input.dtype, input.device

    def new() -> tuple[torch.Tensor, torch.Tensor]:
        out = torch.empty(shape, dtype=dtype, device=device)
        return out, torch.empty(shape, dtype=torch.int64, device=device)

    if math.prod(shape) == 0:
        return lambda x: new()

    (d, h, w), (od, oh, ow) = x.shape[2:], output_size
    windows = (max_window(d, od), max_window(h, oh), max_window(w, ow))
    cfg = config or default_config(x, output_size, windows)
    acc = tl.float64 if dtype == torch.float64 else tl.float32
    launch: Launch | GlobalLaunch
    match cfg:
        case GlobalSplit():
            if not global_pooling(x, output_size):
                raise ValueError("a GlobalSplit config needs global pooling of contiguous planes")
            launch = plan_global(x, cfg)
        case TileShape():
            launch = plan_window_tiles(x, output_size, windows, cfg, acc)
        case PairTiles():
            launch = _plan_pairs(x, output_size, windows, cfg, acc)
        case ColumnRows():
            launch = plan_column_rows(x, output_size, windows, cfg, acc)
        case LaneBlock():
            launch = _plan_lanes(x, output_size, windows, cfg, acc)
        case ChunkTiles():
            launch = _plan_chunks(x, output_size, windows, cfg, acc)
    unbatched = input.dim() == 4

    def run(input: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out, indices = new()
        launch(input[None] if unbatched else input, out, indices)
        return out, indices

    return run


def _needs_wide(x: torch.Tensor, out_dhw: Spatial, windows: Spatial) -> bool:
    """Whether offsets or positions could pass 2^31, with masked lanes up to one chunk of
    the default chunk tiles past a window (the bound every small-window kernel shares)."""
    d, h, w = x.shape[2:]
    od, oh, ow = out_dhw
    sides = chunk_tiles(windows, out_dhw)
    reach = span(x.shape[2:], x.stride()[2:]) + (
        sides.bkd * x.stride(2) + sides.bkh * x.stride(3) + sides.bkw * x.stride(4)
    )
    return not fits_int32(
        reach,
        d * h * w + sides.bkd * h * w,
        (od + 1) * d,
        (oh + sides.boh + 1) * h,
        (ow + sides.bow + 1) * w,
    )


def _plan_pairs(
    x: torch.Tensor, out_dhw: Spatial, windows: Spatial, cfg: PairTiles, acc: tl.dtype
) -> Launch:
    """Launch of the whole-row kernel (windows two wide along W)."""
    n, c, d, h, w = x.shape
    od, oh, ow = out_dhw
    if w != 2 * ow:
        raise ValueError(f"the whole-row kernel needs W = 2·OW, got W={w}, OW={ow}")
    rows = n * c * od
    n_oh_blocks = triton.cdiv(oh, cfg.boh)
    n_ow_blocks = triton.cdiv(ow, cfg.bow)
    vec = vector_width(x, 2 * cfg.bow)
    sxn, sxc, sxd, sxh, sxw = x.stride()
    scalars = (c, d, h, w, h * w, od, oh, ow, sxn // vec, sxc // vec, sxd // vec)
    scalars += (sxh // vec, sxw, rows, n_oh_blocks, n_ow_blocks, w // vec)
    constants = {
        "ACC": acc,
        "BR": cfg.br,
        "BOH": cfg.boh,
        "BOW": cfg.bow,
        "KD": windows[0],
        "KH": windows[1],
        "VEC": vec,
        "WIDE": _needs_wide(x, out_dhw, windows),
        "num_warps": cfg.num_warps,
    }
    grid = (triton.cdiv(rows, cfg.br) * n_oh_blocks * n_ow_blocks,)
    return Launch(_pair_window_kernel, grid, scalars, constants)


def _plan_lanes(
    x: torch.Tensor, out_dhw: Spatial, windows: Spatial, cfg: LaneBlock, acc: tl.dtype
) -> Launch:
    """Launch of the lane-per-window kernel."""
    n, c, d, h, w = x.shape
    od, oh, ow = out_dhw
    total = n * c * od * oh * ow
    scalars = (c, d, h, w, h * w, od, oh, ow, *x.stride(), total)
    constants = {
        "ACC": acc,
        "BLOCK": cfg.block,
        "KD": windows[0],
        "KH": windows[1],
        "KW": windows[2],
        "UNROLL_W": UNROLL_W,
        "WIDE": _needs_wide(x, out_dhw, windows) or not fits_int32(total + cfg.block),
        "num_warps": cfg.num_warps,
    }
    return Launch(_small_window_kernel, (triton.cdiv(total, cfg.block),), scalars, constants)


def _plan_chunks(
    x: torch.Tensor, out_dhw: Spatial, windows: Spatial, cfg: ChunkTiles, acc: tl.dtype
) -> Launch:
    """Launch of the chunked kernel."""
    n, c, d, h, w = x.shape
    od, oh, ow = out_dhw
    rows = n * c * od
    n_oh_blocks = triton.cdiv(oh, cfg.boh)
    n_ow_blocks = triton.cdiv(ow, cfg.bow)
    # Masked lanes may point up to one chunk past a window: keep those offsets in range too.
    reach = span(x.shape[2:], x.stride()[2:]) + (
        cfg.bkd * x.stride(2) + cfg.bkh * x.stride(3) + cfg.bkw * x.stride(4)
    )
    wide = not fits_int32(
        reach,
        d * h * w + cfg.bkd * h * w,
        (od + 1) * d,
        (oh + cfg.boh + 1) * h,
        (ow + cfg.bow + 1) * w,
    )
    scalars = (c, d, h, w, h * w, od, oh, ow, *x.stride(), *windows, rows)
    scalars += (n_oh_blocks, n_ow_blocks)
    constants = {
        "ACC": acc,
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
    return Launch(_adaptive_max_pool3d_kernel, grid, scalars, constants)
