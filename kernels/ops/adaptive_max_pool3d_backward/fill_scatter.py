"""The fill_scatter kernel of adaptive_max_pool3d_backward: any windows, one launch.

A program owns a tile of the (contiguous) gradient: TD depth slices × TH rows × whole rows
of W. It walks the outputs whose windows meet the tile at output resolution (coalesced loads
of index and gradient) and stores each gradient at its argmax when that lies in the tile.
Zeros go over the tile with vector stores (which depend on no load) while the first box's
sums are in flight, and a barrier puts every scattered store after them. The zeros and the
scattered values meet in L2, so DRAM sees each line written about once: the memory floor,
with a few instructions per output instead of per input element. Overlapping windows are
summed once (`_scatter.sum_once`). With `Config.in_box` one box holds every output a tile
meets, and each output's neighbouring candidates are read from the box's registers
(`_scatter.sum_in_box`) instead of loaded once its own index arrives: one trip to memory a
program instead of two a box (the default where a tile has many elements a box lane).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import ClassVar

import triton
import triton.language as tl

from kernels.heuristics import Heuristics
from kernels.launch import Launch
from kernels.ops._adaptive import (
    Backward,
    div_by,
    fits_int32,
    next_pow2,
    span,
    unflatten3,
    vector_width,
)
from kernels.ops.adaptive_max_pool3d_backward._scatter import (
    bounds_table,
    divisor_of,
    divisors_of,
    fits_axes,
    split_position,
    sum_in_box,
    sum_once,
)

NAME = "fill_scatter"


@triton.jit
def _box_outputs(j, total, n_oh, by_rows, by_ow, WIDE: tl.constexpr):
    """Lanes j of a program's outputs, (output slice, row, column) relative to its first:
    ROWS lanes a slice (the most rows any tile meets, times OW), rows past n_oh masked."""
    slice_ = div_by(j, by_rows, WIDE)
    rest = j - slice_ * by_rows[0]
    row = div_by(rest, by_ow, WIDE)
    return slice_, row, rest - row * by_ow[0], (j < total) & (row < n_oh)


@triton.jit
def fill_scatter_kernel(
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
    ROWS,
    HW_vec,
    W_vec,
    grad_strides,
    idx_strides,
    n_d_tiles,
    n_h_tiles,
    ACC: tl.constexpr,
    TD: tl.constexpr,
    TH: tl.constexpr,
    SPLIT_H: tl.constexpr,
    ZB: tl.constexpr,
    BOX: tl.constexpr,
    CD: tl.constexpr,
    CH: tl.constexpr,
    CW: tl.constexpr,
    IN_BOX: tl.constexpr,
    VEC: tl.constexpr,
    WIDE: tl.constexpr,
):
    sgn, sgc, sgd, sgh, sgw = grad_strides
    sin, sic, sid, sih, siw = idx_strides
    pid = tl.program_id(0)
    plane, dt, ht = unflatten3(pid, n_d_tiles, n_h_tiles)
    plane = plane.to(tl.int64)
    n = plane // C
    c = plane % C
    d0 = dt * TD
    d1 = tl.minimum(d0 + TD, D)
    h0 = ht * TH
    h1 = tl.minimum(h0 + TH, H)
    HW = HW_vec * VEC
    # Offsets in the gradient's plane are 32-bit unless the plane passes 2^31 elements.
    if WIDE:
        d0 = d0.to(tl.int64)
        d1 = d1.to(tl.int64)
        h0 = h0.to(tl.int64)
        h1 = h1.to(tl.int64)
        HW = HW.to(tl.int64)
    gin_plane = gin_ptr + plane * D * HW_vec * VEC
    grad_plane = grad_ptr + (n * sgn + c * sgc)
    idx_plane = idx_ptr + (n * sin + c * sic)

    # The outputs whose windows meet the tile, BOX at a time: slices from od_lo, rows from
    # oh_lo (bounds_ptr holds, per axis, the first output covering each position and one
    # past the last). The first box's index and gradient loads go out before the zeros.
    od_lo = tl.load(bounds_ptr + d0)
    n_od = tl.load(bounds_ptr + D + d1 - 1) - od_lo
    oh_lo = tl.load(bounds_ptr + 2 * D + h0)
    n_oh = tl.load(bounds_ptr + 2 * D + H + h1 - 1) - oh_lo
    total = n_od * ROWS
    divisors = divisors_of(bounds_ptr, D, H, W, OD, OH, OW)
    by_rows = divisor_of(bounds_ptr, D, H, W, ROWS, 5)
    by_ow = divisors[4]
    lanes = tl.arange(0, BOX)
    if WIDE:
        lanes = lanes.to(tl.int64)
    zero = lanes * 0
    sd, sh, ow, ok = _box_outputs(lanes, total, n_oh, by_rows, by_ow, WIDE)
    od = od_lo + sd
    oh = oh_lo + sh
    chosen = tl.load(idx_plane + (od * sid + oh * sih + ow * siw), mask=ok, other=-1).to(zero.dtype)
    g = tl.load(grad_plane + (od * sgd + oh * sgh + ow * sgw), mask=ok, other=0.0)

    tile_lo = d0 * HW
    tile_hi = d1 * HW
    if IN_BOX:  # every output meeting the tile in this one box: no neighbour loaded
        mine = _in_tile(chosen, ok, tile_lo, tile_hi, h0, h1, divisors, H, W, SPLIT_H, WIDE)
        _zero_tile(gin_plane, d0, d1, h0, h1, HW_vec, W_vec, ZB, VEC, SPLIT_H)
        value, writer = sum_in_box(
            chosen, g, mine, lanes, od, oh, ow, divisors, D, H, W, ROWS, OW, ACC, CD, CH, CW,
            WIDE,
        )  # fmt: skip
        tl.debug_barrier()
        tl.store(gin_plane + chosen, value.to(gin_ptr.dtype.element_ty), mask=writer)
    else:
        # Each box's gradients into the tile, the next box's loads in flight meanwhile. The
        # first box's sums are taken before the zeros, so that its chain of dependent loads
        # overlaps them; its stores, and every later box's, land after the zeros (a box always
        # exists: windows cover the input, so every tile meets an output).
        for box_start in range(0, total, BOX):
            sd, sh, next_ow, next_ok = _box_outputs(
                box_start + BOX + lanes, total, n_oh, by_rows, by_ow, WIDE
            )
            next_od = od_lo + sd
            next_oh = oh_lo + sh
            next_chosen = tl.load(
                idx_plane + (next_od * sid + next_oh * sih + next_ow * siw), mask=next_ok, other=-1
            ).to(zero.dtype)
            next_g = tl.load(
                grad_plane + (next_od * sgd + next_oh * sgh + next_ow * sgw),
                mask=next_ok,
                other=0.0,
            )
            mine = _in_tile(chosen, ok, tile_lo, tile_hi, h0, h1, divisors, H, W, SPLIT_H, WIDE)
            value, writer = sum_once(
                idx_plane, grad_plane, bounds_ptr, divisors, chosen, g, mine, od, oh, ow,
                D, H, W, sid, sih, siw, sgd, sgh, sgw, ACC, CD, CH, CW, WIDE,
            )  # fmt: skip
            if box_start == 0:
                _zero_tile(gin_plane, d0, d1, h0, h1, HW_vec, W_vec, ZB, VEC, SPLIT_H)
                # The scattered stores must land after the zeros (other threads' stores).
                tl.debug_barrier()
            tl.store(gin_plane + chosen, value.to(gin_ptr.dtype.element_ty), mask=writer)
            od, oh, ow, ok, chosen, g = next_od, next_oh, next_ow, next_ok, next_chosen, next_g


@triton.jit
def _in_tile(
    chosen, ok, tile_lo, tile_hi, h0, h1, divisors, H, W,
    SPLIT_H: tl.constexpr, WIDE: tl.constexpr,
):  # fmt: skip
    """Which outputs chose an element of the program's tile (depths d0..d1, rows h0..h1)."""
    # A valid index's low word is the index when the volume fits in 32 bits.
    mine = ok & (chosen >= tile_lo) & (chosen < tile_hi)
    if SPLIT_H:  # the split the sums take too (the compiler keeps one); lanes with a
        # negative index divide garbage but are not `mine` already
        _, ph, _ = split_position(chosen, divisors, H, W, WIDE)
        mine = mine & (ph >= h0) & (ph < h1)
    return mine


@triton.jit
def _zero_tile(
    gin_plane, d0, d1, h0, h1, HW_vec, W_vec,
    ZB: tl.constexpr, VEC: tl.constexpr, SPLIT_H: tl.constexpr,
):  # fmt: skip
    """Zeros over a program's tile: one contiguous run of whole slices, or the rows h0..h1 of
    each slice d0..d1, ZB elements a store."""
    zeros = tl.zeros([ZB], dtype=gin_plane.dtype.element_ty)
    zlanes = tl.arange(0, ZB)
    if SPLIT_H:
        run = (h1 - h0) * W_vec * VEC
        for d in range(d0, d1):
            start = gin_plane + (d * HW_vec + h0 * W_vec) * VEC
            for chunk in range(0, tl.cdiv(run, ZB)):
                offs = chunk * ZB + zlanes
                tl.store(start + offs, zeros, mask=offs < run)
    else:
        run = (d1 - d0) * HW_vec * VEC
        start = gin_plane + d0 * HW_vec * VEC
        for chunk in range(0, tl.cdiv(run, ZB)):
            offs = chunk * ZB + zlanes
            tl.store(start + offs, zeros, mask=offs < run)


@dataclass(frozen=True)
class Config:
    """Elements a program (whole slices, or rows of one), outputs walked at a time, zeros
    stored a step, warps."""

    kernel: ClassVar[str] = NAME
    tile: int
    box: int
    zero_block: int
    num_warps: int
    rows: int = 0  # rows of H a tile holds, its slices as many as `tile` allows (0: `sides`)
    in_box: bool = False  # one box holds every output a tile meets: neighbours from it


def default_tile(p: Backward, h: Heuristics) -> tuple[int, int]:
    """(elements a program, rows of H a tile holds; 0: `sides`): `h.fill_sparse`'s tiles
    where windows overlap and are large (unless an element has at most two candidates and
    whole planes fit the next rule), a whole (n, c) plane where there are at least
    `h.many_planes` planes of at most `h.plane_bytes`, else tiles of `h.tile_bytes` (half
    where no windows overlap), split where no window is where they can be (`edge_tile`); or
    `h.fill_elements`."""
    if h.fill_elements is not None:
        return h.fill_elements, 0
    size = p.gin.element_size()
    plane = math.prod(p.in_dhw)
    overlap = p.candidate_outputs > 1
    lean = p.candidate_outputs <= 2  # a visit checks one neighbour at most
    planes_fit = p.planes >= h.many_planes and plane * size <= h.plane_bytes
    sparse_tile, large_window = h.fill_sparse
    if overlap and not (lean and planes_fit) and plane >= large_window * math.prod(p.out_dhw):
        return sparse_tile, 0
    if planes_fit:
        return plane, 0
    if overlap:
        return edge_tile(p, h.tile_bytes // size)
    return h.tile_bytes // 2 // size, 0


def sides(p: Backward, tile: int, rows: int = 0) -> tuple[int, int]:
    """(TD, TH): `rows` rows of as many slices as the tile's elements hold, else whole
    slices of them, or rows of one slice."""
    d, h, w = p.in_dhw
    if rows:
        th = min(h, rows)
        return max(1, min(d, tile // (th * w))), th
    if h * w >= tile:
        return 1, max(1, min(h, tile // w))
    return max(1, min(d, tile // (h * w))), h


def edge_tile(p: Backward, tile: int) -> tuple[int, int]:
    """(elements, rows): a tile of at most `tile` elements that splits no window, where D's
    windows overlap (so whole-slice tiles split some) and H's meet edge to edge (one ends
    where the next starts) somewhere inside H: the fewest rows after which they do, and as
    many depths as fit, whole periods of D's own edges where one fits. (tile, 0) where
    there is no such tile. An output then belongs to one tile: none is visited twice."""
    (d, h, w), (od, oh, _) = p.in_dhw, p.out_dhw
    h_step, d_step = h // math.gcd(h, oh), d // math.gcd(d, od)
    depths = min(d, tile // (h_step * w))
    if d % od == 0 or h_step >= h or depths < 1:
        return tile, 0
    if depths >= d_step:
        depths -= depths % d_step
    return depths * h_step * w, h_step


def tiles(p: Backward, h: Heuristics, tile: int, rows: int = 0) -> Config:
    """A config of `tile` elements a program (`rows` rows of H over as many slices as fit;
    0: `sides`), the rest by `h`: 8 warps for tiles of 64 KB or more (else 4), outputs walked
    at a time by whether a program walks a whole plane, else by how many candidates an
    element has (each check holds registers)."""
    num_warps = 8 if tile * p.gin.element_size() >= 65536 else 4
    td, th = sides(p, tile, rows)
    d, h_, _ = p.in_dhw
    if h.fill_box is not None:
        box = h.fill_box
    else:
        few, plane, rest = h.fill_box_per_warp
        whole = (td, th) == (d, h_)
        per_warp = plane if whole else few if p.candidate_outputs <= 2 else rest
        box = per_warp * num_warps
    zero_block = h.fill_zero_block or h.fill_zero_per_warp * num_warps
    if h.trim_blocks:  # at most a plane's outputs walked, a tile's elements zeroed
        box = min(box, next_pow2(math.prod(p.out_dhw)))
        zero_block = min(zero_block, next_pow2(min(tile, math.prod(p.in_dhw))))
    return Config(tile, box, zero_block, num_warps, rows=rows)


def most_met(in_size: int, out_size: int, run: int) -> int:
    """The most outputs whose windows meet one run of `run` positions along an axis (runs
    from 0 in steps of `run`): from the first covering its start to the last covering its
    end (`_adaptive.covering_bounds`)."""
    return max(
        -((-min(start + run, in_size) * out_size) // in_size) - (start * out_size) // in_size
        for start in range(0, in_size, run)
    )


def box_rows(p: Backward, th: int) -> int:
    """Lanes a box gives each output slice: OW times the most output rows any tile of TH
    rows meets."""
    return p.out_dhw[2] * most_met(p.in_dhw[1], p.out_dhw[1], th)


def tile_outputs(p: Backward, td: int, th: int) -> int:
    """The most box lanes a tile of TD slices and TH rows walks: the output slices its
    depths meet, `box_rows` lanes each."""
    return most_met(p.in_dhw[0], p.out_dhw[0], td) * box_rows(p, th)


def in_one_box(p: Backward, cfg: Config) -> Config:
    """`cfg` with one box holding every output a tile meets (`Config.in_box`)."""
    td, th = sides(p, cfg.tile, cfg.rows)
    return dataclasses.replace(cfg, box=next_pow2(tile_outputs(p, td, th)), in_box=True)


def pairs_overlap(p: Backward) -> bool:
    """Whether some element has two candidate outputs along an axis and none more: where one
    box of a tile's outputs holds every neighbour a sum checks (`Config.in_box`) and has
    neighbours to check."""
    return max(p.candidates) == 2


def walked(p: Backward, h: Heuristics) -> Config:
    """`tiles` of the default tile, its outputs walked a box at a time."""
    return tiles(p, h, *default_tile(p, h))


def default(p: Backward, h: Heuristics) -> Config:
    """`walked`, or its outputs in one box (`in_one_box`) with `h.fill_in_box_warps` warps
    where `pairs_overlap` and the tile holds at least `h.fill_in_box` elements (by dtype) a
    box lane."""
    cfg = walked(p, h)
    least = h.narrow(h.fill_in_box, p.gin.element_size())
    if least and pairs_overlap(p):
        boxed = in_one_box(p, cfg)
        td, th = sides(p, cfg.tile, cfg.rows)
        if td * th * p.in_dhw[2] >= least * boxed.box:
            return dataclasses.replace(boxed, num_warps=h.fill_in_box_warps)
    return cfg


def plan(p: Backward, cfg: Config, h: Heuristics) -> Launch:
    """Launch of the fill_scatter kernel (the gradient must be contiguous)."""
    grad5, idx5, gin5 = p.grad, p.idx, p.gin
    n, c, d, h_, w = gin5.shape
    od, oh, ow = p.out_dhw
    assert gin5.is_contiguous(), "the scatter writes flat offsets into a contiguous gradient"
    tile = cfg.tile
    hw = h_ * w
    td, th = sides(p, tile, cfg.rows)
    n_d, n_h = triton.cdiv(d, td), triton.cdiv(h_, th)
    vec = vector_width(gin5)
    reach = max(span(t.shape[2:], t.stride()[2:]) for t in (grad5, idx5))
    # Offsets, positions times output sizes (the bounds) and box lanes must fit in 32 bits.
    wide = not (
        fits_int32(reach, d * hw + tile, (d + td) * oh * ow + 65536)
        and fits_axes((d, h_, w), (od, oh, ow))
    )
    rows = box_rows(p, th)
    cd, ch, cw = p.candidates
    if cfg.in_box:
        if max(cd, ch, cw) > 2:
            raise ValueError(
                f"fill_scatter's box holds neighbours of two candidates an axis, got {cfg}"
            )
        outputs = tile_outputs(p, td, th)
        if cfg.box < outputs:
            raise ValueError(
                f"fill_scatter's box must hold the {outputs} outputs a tile meets, got {cfg}"
            )
    grid = (n * c * n_d * n_h,)
    scalars = (
        bounds_table((d, h_, w), (od, oh, ow), gin5.device, rows),
        c,
        d,
        h_,
        w,
        od,
        oh,
        ow,
        rows,
        hw // vec,
        w // vec,
        grad5.stride(),
        idx5.stride(),
        n_d,
        n_h,
    )
    constants = {
        "ACC": p.acc,
        "TD": td,
        "TH": th,
        "SPLIT_H": th < h_,
        "ZB": cfg.zero_block,
        "BOX": cfg.box,
        "CD": cd,
        "CH": ch,
        "CW": cw,
        "IN_BOX": cfg.in_box,
        "VEC": vec,
        "WIDE": wide,
        "num_warps": cfg.num_warps,
    }
    return Launch(fill_scatter_kernel, grid, scalars, constants)
