"""The column_max kernel of adaptive_max_pool3d: small windows of any alignment.

A program owns BR output rows, each a flat (plane, od, oh) with its own D and H windows. Per
step of the window walk it loads, for every row, one whole input row (d, h, all W columns):
contiguous vectors of up to 16 bytes a thread, as a copy reads. It keeps a running maximum
per column, and the walk step that set it, with elementwise work only. Once at the end each
column becomes one (value, position) and each output gathers its window's columns
(`tl.gather`) and reduces them; where the W windows tile the row (a power of two wide, edge
to edge) each output reduces its columns where they lie. An unrolled walk may take two
passes (`Config.two_pass`): the columns' maxima alone, in the input's own type (2-byte values
stay packed, two to an instruction), then the rows again last to first for the first step
holding each maximum; the compiler keeps the first pass's rows in registers, so the second
loads nothing.

The walk keeps no NaN step (a NaN-propagating maximum says whether there was one; only a
program that saw a NaN walks again with the steps), and the divisions by the output sizes are
the host's multiply-highs. A row that overlapping windows share is read once by each of
them; the carrying walk (`Config.carry`, `column_sweep_kernel`) instead gives a program row
a (plane, oh) and walks its depth once, window after window, at the cost of OD times fewer
rows.

The lane_window kernel instead gives each lane one output, so a warp's load reads a few
bytes from each of 32 windows KW elements apart; here every load is a full-width vector and
the per-output work happens once per row, not once per element.

Semantics are PyTorch's: within a box window scan order is flat order, so the first maximum
is the one with the smallest position and the last NaN the one with the largest. A row or
column past a window's end is read as its last one again (clamped, not masked), which
changes neither the maximum nor, mapped back the same way, the position.
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
    by,
    div_by,
    fits_int32,
    keep_first,
    keep_first_max,
    key_nans,
    merge_keyed,
    next_pow2,
    span,
    unflatten3_by,
    vector_width,
    window_by,
)

NAME = "column_max"

# The walk over a window's H rows is unrolled, so the loads of a step are issued together.
MAX_KH = 16
# Columns a program row may hold (swept up to 64; wider rows leave each thread more of the
# final gather), and gathered (output, column) pairs per column.
MAX_COLUMNS = 256
MAX_GATHER = 4
MAX_GRID_Y = 65535  # CUDA's bound on a grid's second axis


@triton.jit
def _row(rows, kd, kh, VEC: tl.constexpr):
    """Row (kd, kh) of every program row's window, clamped, as loaded."""
    x_ptr, x_rows, d_start, d_last, h_start, h_last, sxd, sxh, col_offs, load_ok = rows
    d_offs = x_rows + (tl.minimum(d_start + kd, d_last) * sxd) * VEC
    h_offs = (tl.minimum(h_start + kh, h_last) * sxh) * VEC
    return tl.load(x_ptr + ((d_offs + h_offs)[:, None] + col_offs), mask=load_ok)


@triton.jit
def _walk_rows(
    rows, kd, state, ACC: tl.constexpr, KH: tl.constexpr, VEC: tl.constexpr, NAN: tl.constexpr
):
    """The KH rows of depth step `kd` of every program row: loads first, then the compares.
    `rows` = (x_ptr, row offsets, d_start, d_last, h_start, h_last, sxd, sxh, column offsets,
    load mask); `state` = the running (best, best_step, third): with NAN the last NaN's step,
    else a maximum that turns NaN once any element is (one instruction an element where the
    step costs two)."""
    best, best_step, third = state
    for kh in tl.static_range(KH):
        v = _row(rows, kd, kh, VEC).to(ACC)
        if NAN:
            best, best_step, third = keep_first_max(v, kd * KH + kh, best, best_step, third)
        else:
            best, best_step = keep_first(v, kd * KH + kh, best, best_step)
            third = tl.maximum(third, v, propagate_nan=tl.PropagateNan.ALL)
    return best, best_step, third


@triton.jit
def _walk(
    rows,
    steps,
    ACC: tl.constexpr,
    BR: tl.constexpr,
    BW: tl.constexpr,
    KD: tl.constexpr,
    KH: tl.constexpr,
    VEC: tl.constexpr,
    UNROLL_D: tl.constexpr,
    NAN: tl.constexpr,
):
    """Every program row's window rows, all KD depth steps unrolled or `steps` of them rolled:
    per column (best, first step of best, last NaN's step or a NaN-propagating maximum)."""
    state = (
        tl.full([BR, BW], float("-inf"), ACC),
        tl.zeros([BR, BW], dtype=tl.int32),  # the first row's step until one beats it
        tl.full([BR, BW], -1, tl.int32) if NAN else tl.full([BR, BW], float("-inf"), ACC),
    )
    if UNROLL_D:
        for kd in tl.static_range(KD):
            state = _walk_rows(rows, kd, state, ACC, KH, VEC, NAN)
    else:
        for kd in range(steps):
            state = _walk_rows(rows, kd, state, ACC, KH, VEC, NAN)
    return state


@triton.jit
def _top_rows(rows, kd, top, KH: tl.constexpr, VEC: tl.constexpr):
    """Pass one over depth step `kd`'s KH rows: the running NaN-propagating maxima."""
    for kh in tl.static_range(KH):
        v = _row(rows, kd, kh, VEC)
        # Cast back: Triton 3.6 widens a bf16 maximum to fp32.
        top = tl.maximum(top, v, propagate_nan=tl.PropagateNan.ALL).to(v.dtype)
    return top


@triton.jit
def _first_rows(rows, kd, top, step, KH: tl.constexpr, VEC: tl.constexpr):
    """Pass two over depth step `kd`'s KH rows, last to first: the step of each match."""
    for j in tl.static_range(KH):
        kh = KH - 1 - j
        step = tl.where(_row(rows, kd, kh, VEC) == top, kd * KH + kh, step)
    return step


@triton.jit
def _two_passes(
    rows, steps, BR: tl.constexpr, BW: tl.constexpr, KD: tl.constexpr, KH: tl.constexpr,
    VEC: tl.constexpr, UNROLL_D: tl.constexpr,
):  # fmt: skip
    """The two-pass walk: every column's NaN-propagating maximum in the input's own type (one
    packed instruction per two 2-byte elements, no step to keep), then the rows again last to
    first for the first step holding it (NaN-free columns; a NaN walks again)."""
    top = tl.full([BR, BW], float("-inf"), rows[0].dtype.element_ty)
    step = tl.zeros([BR, BW], dtype=tl.int32)
    if UNROLL_D:
        for kd in tl.static_range(KD):
            top = _top_rows(rows, kd, top, KH, VEC)
        for i in tl.static_range(KD):
            step = _first_rows(rows, KD - 1 - i, top, step, KH, VEC)
    else:
        for kd in range(steps):
            top = _top_rows(rows, kd, top, KH, VEC)
        for i in range(steps):
            step = _first_rows(rows, steps - 1 - i, top, step, KH, VEC)
    return top, step


@triton.jit
def _position(step, rows_at, col, HW, W, KH: tl.constexpr):
    """A walk step (kd·KH + kh) of column `col` back to its flat position, clamped as the
    walk clamped; `rows_at` = (d_start, d_last, h_start, h_last)."""
    d_start, d_last, h_start, h_last = rows_at
    d = tl.minimum(d_start + step // KH, d_last)
    return d * HW + tl.minimum(h_start + step % KH, h_last) * W + col


@triton.jit
def column_max_kernel(
    x_ptr,
    out_ptr,
    idx_ptr,
    D,
    H,
    W,
    HW,
    by_c,
    by_od,
    by_oh,
    by_ow,
    x_strides,
    rows,
    W_vec,
    ACC: tl.constexpr,
    BR: tl.constexpr,
    BW: tl.constexpr,
    BOW: tl.constexpr,
    KD: tl.constexpr,
    KH: tl.constexpr,
    KWP: tl.constexpr,
    TILED: tl.constexpr,
    VEC: tl.constexpr,
    UNROLL_D: tl.constexpr,
    TWO_PASS: tl.constexpr,
    WIDE: tl.constexpr,
):
    sxn, sxc, sxd, sxh, sxw = x_strides
    IDX: tl.constexpr = tl.int64 if WIDE else tl.int32
    r = tl.program_id(0).to(IDX) * BR + tl.arange(0, BR)
    r_ok = r < rows
    # Divisions by the output sizes and C are multiply-highs with the host's `by` tuples:
    # a runtime division is a few dozen instructions, most of a program's work after the walk.
    plane, od, oh = unflatten3_by(r, by_od, by_oh, WIDE)
    # The host passes the strides above W (and W as W_vec) divided by VEC, so the compiler
    # can prove every row start VEC-aligned and load it as whole vectors.
    n = div_by(plane, by_c, WIDE)
    x_rows = (n.to(tl.int64) * sxn + (plane - n * by_c[0]).to(tl.int64) * sxc) * VEC
    d_start, d_end = window_by(od, D, by_od, WIDE)
    h_start, h_end = window_by(oh, H, by_oh, WIDE)
    d_last = d_end - 1
    h_last = h_end - 1
    w = tl.arange(0, BW)
    load_ok = r_ok[:, None] & (w < W_vec * VEC)[None, :]
    col_offs = (w * sxw)[None, :]

    rows_of = (x_ptr, x_rows, d_start, d_last, h_start, h_last, sxd, sxh, col_offs, load_ok)
    # Rolled, as many depth steps as the program's longest D window (may be fewer than KD).
    steps = tl.max(tl.where(r_ok, d_end - d_start, 0)).to(tl.int32)  # int32 steps, WIDE too
    # First without NaN bookkeeping; a program whose rows hold a NaN walks again with it,
    # rolled (NaN is rare; unrolled, that walk cost the fast one registers).
    if TWO_PASS:
        seen, best_step = _two_passes(rows_of, steps, BR, BW, KD, KH, VEC, UNROLL_D)
        best = seen.to(ACC)
    else:
        best, best_step, seen = _walk(rows_of, steps, ACC, BR, BW, KD, KH, VEC, UNROLL_D, False)
    nan_step = tl.full([BR, BW], -1, tl.int32)
    if tl.max((seen != seen).to(tl.int32)) > 0:
        best, best_step, nan_step = _walk(rows_of, steps, ACC, BR, BW, KD, KH, VEC, False, True)

    rows_at = (d_start[:, None], d_last[:, None], h_start[:, None], h_last[:, None])
    _store_windows(
        best, best_step, nan_step, rows_at, r, r_ok, w, HW, W, by_ow, out_ptr, idx_ptr,
        BR, BOW, KWP, TILED, KH, WIDE,
    )  # fmt: skip


@triton.jit
def _store_windows(
    best, best_step, nan_step, rows_at, out_rows, rows_ok, w, HW, W, by_ow, out_ptr, idx_ptr,
    BR: tl.constexpr, BOW: tl.constexpr, KWP: tl.constexpr, TILED: tl.constexpr,
    KH: tl.constexpr, WIDE: tl.constexpr,
):  # fmt: skip
    """Each program row's walked columns (`rows_at` its window rows) -> its OW outputs, stored
    at flat output row `out_rows`. TILED: the W windows are KWP columns each, edge to edge,
    so each output reduces its own columns where they lie (no gather)."""
    IDX: tl.constexpr = tl.int64 if WIDE else tl.int32
    BIG: tl.constexpr = 2**62 if WIDE else 2**31 - 1
    # Each column as one (value, key) before the gather (positions computed once a column,
    # not once a gathered one): its first maximum, or its last NaN (`key_nans`).
    saw_nan = nan_step >= 0
    col_step = tl.where(saw_nan, nan_step, best_step)
    col_pos = _position(col_step, rows_at, w.to(IDX)[None, :], HW, W, KH)
    col_value, col_key = key_nans(best, col_pos, saw_nan)

    if TILED:  # columns past W belong to outputs past OW, which are not stored
        value = tl.reshape(col_value, (BR, BOW, KWP))
        key = tl.reshape(col_key, (BR, BOW, KWP))
    else:  # each output's window columns (KWP a window, the last repeated past its end)
        j = tl.arange(0, BOW * KWP)
        ow = (j // KWP).to(IDX)
        w_start, w_end = window_by(ow, W, by_ow, WIDE)
        col = tl.minimum(tl.minimum(w_start + j % KWP, w_end - 1), W - 1).to(tl.int32)
        cols = tl.broadcast_to(col[None, :], (BR, BOW * KWP))
        value = tl.reshape(tl.gather(col_value, cols, 1), (BR, BOW, KWP))
        key = tl.reshape(tl.gather(col_key, cols, 1), (BR, BOW, KWP))
    top, first = merge_keyed(value, key, BIG, 2)

    o = tl.arange(0, BOW)
    out_offs = out_rows.to(tl.int64)[:, None] * by_ow[0] + o[None, :]
    live = rows_ok[:, None] & (o < by_ow[0])[None, :]
    tl.store(out_ptr + out_offs, top.to(out_ptr.dtype.element_ty), mask=live)
    tl.store(idx_ptr + out_offs, first.to(tl.int64), mask=live)


@triton.jit
def column_sweep_kernel(
    x_ptr,
    out_ptr,
    idx_ptr,
    D,
    H,
    W,
    HW,
    OD,
    by_c,
    by_od,
    by_oh,
    by_ow,
    x_strides,
    rows,
    W_vec,
    ACC: tl.constexpr,
    BR: tl.constexpr,
    BW: tl.constexpr,
    BOW: tl.constexpr,
    NEW: tl.constexpr,
    RUN: tl.constexpr,
    KH: tl.constexpr,
    KWP: tl.constexpr,
    TILED: tl.constexpr,
    VEC: tl.constexpr,
    WIDE: tl.constexpr,
):
    """column_max with each program row a (plane, oh) whose depth is walked once: window by
    window along D, each depth's H rows reduced to a column maximum and folded into the
    window's. Consecutive D windows share at most one depth (ceil((o+1)·D/OD) -
    floor((o+1)·D/OD) <= 1), so the last depth's columns seed the next window instead of
    being read again; NEW bounds the depths a window adds. With RUN > 0 the second grid axis
    splits the windows into runs of RUN, a run a program: more programs, and a run's first
    window reads its shared depth again."""
    sxn, sxc, sxd, sxh, sxw = x_strides
    IDX: tl.constexpr = tl.int64 if WIDE else tl.int32
    r = tl.program_id(0).to(IDX) * BR + tl.arange(0, BR)
    r_ok = r < rows
    plane = div_by(r, by_oh, WIDE)
    oh = r - plane * by_oh[0]
    n = div_by(plane, by_c, WIDE)
    x_rows = (n.to(tl.int64) * sxn + (plane - n * by_c[0]).to(tl.int64) * sxc) * VEC
    h_start, h_end = window_by(oh, H, by_oh, WIDE)
    h_last = h_end - 1
    w = tl.arange(0, BW)
    load_ok = r_ok[:, None] & (w < W_vec * VEC)[None, :]
    col_offs = (w * sxw)[None, :]
    out_first = plane * OD * by_oh[0] + oh  # output row of (plane, od = 0, oh)

    low = tl.full([BR, BW], float("-inf"), ACC)
    zero = tl.zeros([BR, BW], dtype=tl.int32)
    last_best, last_step, last_top = low, zero, low  # the previous window's last depth
    lane = tl.zeros([BR, 1], dtype=tl.int32)  # the window's scalars as one column
    prev_end = D * 0  # no window before a run's first: nothing carried into it
    if RUN > 0:
        od_first = tl.program_id(1) * RUN
        od_last = tl.minimum(od_first + RUN, OD)
    else:
        od_first = 0
        od_last = OD
    for od in range(od_first, od_last):
        d_start, d_end = window_by(od + prev_end * 0, D, by_od, WIDE)
        carried = (lane + d_start) < prev_end
        best = tl.where(carried, last_best, low)
        best_step = tl.where(carried, last_step, zero)  # the shared depth is this one's first
        top = tl.where(carried, last_top, low)
        first = d_start + (d_start < prev_end).to(d_start.dtype)
        for k in tl.static_range(NEW):
            d = first + k
            valid = (lane + d) < d_end
            depth = (x_ptr, x_rows, d, d, h_start, h_last, sxd, sxh, col_offs, load_ok & valid)
            d_best, d_step, d_top = _walk_rows(depth, 0, (low, zero, low), ACC, KH, VEC, False)
            take = valid & (d_best > best)
            best = tl.where(take, d_best, best)
            best_step = tl.where(take, (d - d_start) * KH + d_step, best_step)
            top = tl.where(valid, tl.maximum(top, d_top, propagate_nan=tl.PropagateNan.ALL), top)
            last_best = tl.where(valid, d_best, last_best)
            last_step = tl.where(valid, d_step, last_step)
            last_top = tl.where(valid, d_top, last_top)
        prev_end = d_end
        rows_of = (x_ptr, x_rows, d_start, d_end - 1, h_start, h_last, sxd, sxh, col_offs, load_ok)
        nan_step = tl.full([BR, BW], -1, tl.int32)
        if tl.max((top != top).to(tl.int32)) > 0:  # a NaN: this window again, with its steps
            best, best_step, nan_step = _walk(
                rows_of, (d_end - d_start).to(tl.int32), ACC, BR, BW, NEW + 1, KH, VEC,
                False, True,
            )  # fmt: skip
        rows_at = (d_start, d_end - 1, h_start[:, None], h_last[:, None])
        _store_windows(
            best, best_step, nan_step, rows_at, out_first + od * by_oh[0], r_ok, w, HW, W,
            by_ow, out_ptr, idx_ptr, BR, BOW, KWP, TILED, KH, WIDE,
        )  # fmt: skip


@dataclass(frozen=True)
class Config:
    """BR output rows a program, each a whole input row a step."""

    kernel: ClassVar[str] = NAME
    br: int
    num_warps: int
    unroll_d: bool = False  # unroll the depth walk too: every load of a window in flight
    carry: bool = False  # a program row a (plane, oh), its depth walked once (column_sweep)
    run: int = 0  # carrying: windows a program walks in turn (0: all of a row's)
    two_pass: bool = False  # not carrying: the columns' maxima first, then their first steps


def fits(p: Forward) -> bool:
    """Whether the kernel can pool rows of W columns into OW with these largest windows: a
    row fits a program and H windows are short enough to unroll (the dispatch table decides
    whether it should)."""
    w, ow, windows = p.x.shape[-1], p.out[2], p.windows
    return (
        windows[1] <= MAX_KH
        and next_pow2(w) <= MAX_COLUMNS
        and next_pow2(ow) * next_pow2(windows[2]) <= MAX_GATHER * next_pow2(w)
    )


def default(p: Forward, h: Heuristics) -> Config:
    """A carrying walk, a row and a warp a program in runs of `h.column_carry_run` windows,
    where the D windows read at least `h.column_carry` times the input; else rows a program
    and warps for rows of W columns and windows of KD·KH rows: a program holds
    `h.column_elements` input elements a step; the depth walk is unrolled up to
    `h.column_unroll_steps` rows, in two passes up to `h.column_two_pass`; warps keep each
    thread near `h.column_per_thread` columns, by dtype and walk (at most one warp a row: see
    `plan`); rolled walks of 4- and 8-byte dtypes take `h.column_rolled_wide` where set."""
    columns = next_pow2(p.x.shape[-1])
    size = p.x.element_size()
    if depth_reads(p.x.shape[2], p.out[0]) >= h.narrow(h.column_carry, size):
        return Config(1, 1, carry=True, run=h.column_carry_run)
    steps = p.windows[0] * p.windows[1]
    unroll_d = steps <= h.narrow(h.column_unroll_steps, size)
    if size >= 4 and not unroll_d and h.column_rolled_wide is not None:
        return Config(*h.column_rolled_wide)
    rows = max(1, h.narrow(h.column_elements, size) // columns)
    if h.pack_rows:  # no more rows than the output has
        rows = min(rows, next_pow2(p.x.shape[0] * p.x.shape[1] * p.out[0] * p.out[1]))
    short, long_, rolled, wide = h.column_per_thread
    if size >= 4:
        per_thread = wide
    elif unroll_d:
        per_thread = short if steps <= h.column_short_walk else long_
    else:
        per_thread = rolled
    warps = max(1, min(h.max_warps, rows, rows * columns // (32 * per_thread)))
    two_pass = unroll_d and steps <= h.narrow(h.column_two_pass, size)
    return Config(rows, warps, unroll_d, two_pass=two_pass)


def plan(p: Forward, cfg: Config, h: Heuristics) -> Launch:
    """Launch of the column_max kernel."""
    x, windows = p.x, p.windows
    if not fits(p):
        raise ValueError(
            f"the column_max kernel does not take windows {windows} of W={x.shape[-1]}"
        )
    if cfg.num_warps > cfg.br:
        # Triton 3.6 asserts (OptimizeThreadLocality) on a gather it cannot keep inside a warp:
        # every warp must own whole rows.
        raise ValueError(f"the column_max kernel needs num_warps <= rows, got {cfg}")
    if cfg.carry and cfg.two_pass:
        raise ValueError(f"the carrying column_max walk takes one pass, got {cfg}")
    n, c, d, h_, w = x.shape
    od, oh, ow = p.out
    rows = n * c * od * oh
    bw, bow = next_pow2(w), next_pow2(ow)
    vec = vector_width(x, bw)
    wide = not fits_int32(
        span(x.shape[2:], x.stride()[2:]),
        d * h_ * w,
        (od + 1) * d,
        (oh + 1) * h_,
        (bow + 1) * w,
        rows + cfg.br,
    )
    sxn, sxc, sxd, sxh, sxw = x.stride()
    strides = (sxn // vec, sxc // vec, sxd // vec, sxh // vec, sxw)
    tiled = tiles_row(w, ow)
    if cfg.carry:
        rows = n * c * oh
        run = cfg.run if 0 < cfg.run < od else 0
        if run:  # a grid's second axis holds at most 65535 programs
            run = max(run, triton.cdiv(od, MAX_GRID_Y))
        scalars = (d, h_, w, h_ * w, od, by(c), by(od), by(oh), by(ow), strides, rows, w // vec)
        constants = {
            "ACC": p.acc,
            "BR": cfg.br,
            "BW": bw,
            "BOW": bow,
            "NEW": new_depths(d, od, run),
            "RUN": run,
            "KH": windows[1],
            "KWP": next_pow2(windows[2]),
            "TILED": tiled,
            "VEC": vec,
            "WIDE": wide,
            "num_warps": cfg.num_warps,
        }
        grid = (triton.cdiv(rows, cfg.br), triton.cdiv(od, run) if run else 1)
        return Launch(column_sweep_kernel, grid, scalars, constants)
    scalars = (d, h_, w, h_ * w, by(c), by(od), by(oh), by(ow), strides, rows, w // vec)
    constants = {
        "ACC": p.acc,
        "BR": cfg.br,
        "BW": bw,
        "BOW": bow,
        "KD": windows[0],
        "KH": windows[1],
        "KWP": next_pow2(windows[2]),
        "TILED": tiled,
        "VEC": vec,
        "UNROLL_D": cfg.unroll_d,
        "TWO_PASS": cfg.two_pass,
        "WIDE": wide,
        "num_warps": cfg.num_warps,
    }
    return Launch(column_max_kernel, (triton.cdiv(rows, cfg.br),), scalars, constants)


def tiles_row(in_size: int, out_size: int) -> bool:
    """Whether windows of `out_size` over `in_size` lie edge to edge, a power of two long."""
    size = in_size // out_size
    return in_size % out_size == 0 and size == next_pow2(size)


def new_depths(in_size: int, out_size: int, run: int = 0) -> int:
    """The most depths a window reads: all of a run's first (runs of `run` windows; 0: one
    run), the ones it adds to its predecessor's (which it shares at most one of) after."""
    most, prev_end = 1, 0
    for o in range(out_size):
        start, end = o * in_size // out_size, -(-(o + 1) * in_size // out_size)
        if run and o % run == 0:
            prev_end = 0  # nothing carried into a run
        most = max(most, end - max(start, prev_end))
        prev_end = end
    return most


def depth_reads(in_size: int, out_size: int) -> float:
    """How many times windows of `out_size` read an axis of `in_size`, shared rows counted
    once a window (1 where they do not overlap)."""
    ends = (-(-(o + 1) * in_size // out_size) for o in range(out_size))
    starts = (o * in_size // out_size for o in range(out_size))
    return sum(end - start for start, end in zip(starts, ends, strict=True)) / in_size
