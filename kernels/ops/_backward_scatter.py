"""The fill-and-scatter kernel of adaptive_max_pool3d_backward: any windows, one launch.

A program owns a tile of the (contiguous) gradient: TD depth slices × TH rows × whole rows
of W. It first writes zeros over the tile with vector stores, which start at once (they
depend on no load), then, after a barrier, walks the outputs whose windows meet the tile at
output resolution (coalesced loads of index and gradient) and stores each gradient at its
argmax when that lies in the tile. The zeros and the scattered values meet in L2, so DRAM
sees each line written about once: the memory floor, with a few instructions per output
instead of per input element.

Deterministic without atomics: an element chosen by several overlapping windows is written
once, by the first of them in (od, oh, ow) order, with the sum of all their gradients in that
order (fp32, fp64 for fp64) — the same additions, in the same order, as the row kernel.
Only axes whose windows overlap (I % O != 0) have such neighbours; the host bounds their
count per axis and sends shapes with too many (steep upsampling) to the row kernel.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from kernels import runtime
from kernels.launch import Launch
from kernels.ops._adaptive import (
    INT32_LIMIT,
    covering_bounds,
    divisor,
    fits_int32,
    max_window,
    span,
    vector_width,
)
from kernels.ops._jit_helpers import div_by, unflatten3, unflatten4

# Candidate outputs an element may have (product over axes); more goes to the row kernel.
MAX_CANDIDATES = 8

# After the bounds, the table holds (magic, shift) pairs (`_adaptive.divisor`) for these
# divisors, in this order: the kernels divide by them without a runtime division.
DIVISORS = ("W", "H", "OD", "OH", "OW", "ROWS")


@triton.jit
def _divisor(bounds_ptr, D, H, W, value, k: tl.constexpr):
    """(value, magic, shift) of the k-th of DIVISORS, for `div_by`."""
    at = bounds_ptr + 2 * (D + H + W) + 2 * k
    return value, tl.load(at), tl.load(at + 1)


@triton.jit
def _divisors(bounds_ptr, D, H, W, OD, OH, OW):
    """The divisors `_sum_once` needs, read once from the table: W, H, OD, OH, OW."""
    return (
        _divisor(bounds_ptr, D, H, W, W, 0),
        _divisor(bounds_ptr, D, H, W, H, 1),
        _divisor(bounds_ptr, D, H, W, OD, 2),
        _divisor(bounds_ptr, D, H, W, OH, 3),
        _divisor(bounds_ptr, D, H, W, OW, 4),
    )


@triton.jit
def _candidates(
    o, p, size, by_o, bounds_ptr, first_at, last_at, mine, C: tl.constexpr, WIDE: tl.constexpr
):
    """Along one axis, the outputs whose windows hold position p of output o's window: the
    first and one past the last. With at most two a position, the other one is o's
    neighbour (o - 1's window ends after p, or o + 1's starts at or before it): arithmetic
    on o (`size` the axis's input size, `by_o` divides by its output size), known before
    the index arrives. With more, the host's table by position."""
    if C == 1:
        return o, o + 1
    elif C == 2:
        prev_end = div_by(o * size + by_o[0] - 1, by_o, WIDE)
        next_start = div_by((o + 1) * size, by_o, WIDE)
        return o - (p < prev_end).to(o.dtype), o + 1 + (p >= next_start).to(o.dtype)
    else:
        first = tl.load(bounds_ptr + first_at + p, mask=mine, other=0).to(o.dtype)
        last = tl.load(bounds_ptr + last_at + p, mask=mine, other=0).to(o.dtype)
        return first, last


@triton.jit
def _sum_once(
    idx_base, grad_base, bounds_ptr, divisors, chosen, g, mine, od, oh, ow,
    D, H, W, sid, sih, siw, sgd, sgh, sgw,
    ACC: tl.constexpr, CD: tl.constexpr, CH: tl.constexpr, CW: tl.constexpr,
    WIDE: tl.constexpr,
):  # fmt: skip
    """(value, writer) for outputs (od, oh, ow) whose argmax `chosen` is theirs to store.

    Every output whose window holds the chosen element, in (od, oh, ow) order: the value is
    the sum of the gradients of those that chose it too, and only the first of them writes.
    On an axis without overlaps (C = 1) the only candidate is the output's own. bounds_ptr
    holds, per axis, the first output covering each position, then one past the last;
    `divisors` are `_divisors`'s. Indices must come from the forward (in their own window).
    """
    if CD * CH * CW == 1:
        return g.to(ACC), mine
    by_w, by_h, by_od, by_oh, by_ow = divisors
    row = div_by(chosen, by_w, WIDE)
    pw = chosen - row * W
    pd = div_by(row, by_h, WIDE)
    ph = row - pd * H
    fd, ld = _candidates(od, pd, D, by_od, bounds_ptr, 0, D, mine, CD, WIDE)
    fh, lh = _candidates(oh, ph, H, by_oh, bounds_ptr, 2 * D, 2 * D + H, mine, CH, WIDE)
    at = 2 * D + 2 * H
    fw, lw = _candidates(ow, pw, W, by_ow, bounds_ptr, at, at + W, mine, CW, WIDE)
    value = tl.zeros_like(g).to(ACC)
    seen_self = chosen != chosen
    shared_before = chosen != chosen
    for ci in tl.static_range(CD):
        cd = fd + ci
        for cj in tl.static_range(CH):
            ch = fh + cj
            for ck in tl.static_range(CW):
                cw = fw + ck
                valid = mine
                is_self = mine
                if CD > 1:
                    valid = valid & (cd < ld)
                    is_self = is_self & (cd == od)
                if CH > 1:
                    valid = valid & (ch < lh)
                    is_self = is_self & (ch == oh)
                if CW > 1:
                    valid = valid & (cw < lw)
                    is_self = is_self & (cw == ow)
                other = valid & ~is_self
                other_idx = tl.load(
                    idx_base + (cd * sid + ch * sih + cw * siw), mask=other, other=-1
                ).to(chosen.dtype)
                other_g = tl.load(
                    grad_base + (cd * sgd + ch * sgh + cw * sgw), mask=other, other=0.0
                )
                same = other & (other_idx == chosen)
                shared_before = shared_before | (same & ~seen_self)
                mine_now = valid & is_self
                seen_self = seen_self | mine_now
                value += tl.where(same, other_g.to(ACC), 0.0)
                value += tl.where(mine_now, g.to(ACC), 0.0)
    return value, seen_self & ~shared_before


@triton.jit
def _scatter_outputs_kernel(
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
    divisors = _divisors(bounds_ptr, D, H, W, OD, OH, OW)
    value, writer = _sum_once(
        idx_base, grad_base, bounds_ptr, divisors, chosen, g, mine, od, oh, ow,
        D, H, W, sid, sih, siw, sgd, sgh, sgw, ACC, CD, CH, CW, WIDE,
    )  # fmt: skip
    gin = gin_ptr + plane * D * H * W
    tl.store(gin + chosen, value.to(gin_ptr.dtype.element_ty), mask=writer)


@triton.jit
def _box_outputs(j, total, n_oh, by_rows, by_ow, WIDE: tl.constexpr):
    """Lanes j of a program's outputs, (output slice, row, column) relative to its first:
    ROWS lanes a slice (the most rows any tile meets, times OW), rows past n_oh masked."""
    slice_ = div_by(j, by_rows, WIDE)
    rest = j - slice_ * by_rows[0]
    row = div_by(rest, by_ow, WIDE)
    return slice_, row, rest - row * by_ow[0], (j < total) & (row < n_oh)


@triton.jit
def _fill_scatter_backward_kernel(
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
    divisors = _divisors(bounds_ptr, D, H, W, OD, OH, OW)
    by_rows = _divisor(bounds_ptr, D, H, W, ROWS, 5)
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

    # 1. Zeros over the tile: one contiguous run of whole slices, or TH rows of each slice.
    zeros = tl.zeros([ZB], dtype=gin_ptr.dtype.element_ty)
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
    # The scattered stores below must land after the zeros (other threads' stores).
    tl.debug_barrier()

    # 2. Each box's gradients into the tile, the next box's loads in flight meanwhile.
    tile_lo = d0 * HW
    tile_hi = d1 * HW
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
            grad_plane + (next_od * sgd + next_oh * sgh + next_ow * sgw), mask=next_ok, other=0.0
        )
        # A valid index's low word is the index when the volume fits in 32 bits.
        mine = ok & (chosen >= tile_lo) & (chosen < tile_hi)
        if SPLIT_H:  # the same split of `chosen` as _sum_once's (computed once); lanes
            # with a negative index divide garbage but are not `mine` already
            row = div_by(chosen, divisors[0], WIDE)
            ph = row - div_by(row, divisors[1], WIDE) * H
            mine = mine & (ph >= h0) & (ph < h1)
        value, writer = _sum_once(
            idx_plane, grad_plane, bounds_ptr, divisors, chosen, g, mine, od, oh, ow,
            D, H, W, sid, sih, siw, sgd, sgh, sgw, ACC, CD, CH, CW, WIDE,
        )  # fmt: skip
        tl.store(gin_plane + chosen, value.to(gin_ptr.dtype.element_ty), mask=writer)
        od, oh, ow, ok, chosen, g = next_od, next_oh, next_ow, next_ok, next_chosen, next_g


def candidates(in_dhw: tuple[int, int, int], out_dhw: tuple[int, int, int]) -> tuple[int, ...]:
    """How many outputs' windows one input element can lie in, per axis."""
    return tuple(max_window(o, i) for i, o in zip(in_dhw, out_dhw, strict=True))


def applies(in_dhw: tuple[int, int, int], out_dhw: tuple[int, int, int]) -> bool:
    """Whether the fill-and-scatter kernel takes this shape (bounded overlap, no empty axis)."""
    if 0 in out_dhw or 0 in in_dhw:
        return False
    cd, ch, cw = candidates(in_dhw, out_dhw)
    return cd * ch * cw <= MAX_CANDIDATES


# A program per (n, c) plane needs about one plane per SM to fill the device (H200: 132 SMs),
# and planes of at most PLANE_BYTES; other shapes take tiles of TILE_BYTES.
MANY_PLANES = 128
PLANE_BYTES = 128 * 1024
TILE_BYTES = 64 * 1024


def default_tile(
    in_dhw: tuple[int, int, int], out_dhw: tuple[int, int, int], element_size: int, planes: int
) -> int:
    """Elements per program (H200 sweeps in docs/performance.md).

    A whole (n, c) plane per program where there are enough planes of at most 128 KB (no
    output is read by two programs; the 100 KB fp16 planes of the large sizes did best so),
    else 64 KB tiles (256 KB fp16 planes and 200–512 KB fp32 planes did best so), 32 KB
    where no windows overlap. Under the interpreter: as many elements as fit.
    """
    if runtime.interpreted:
        return 65536
    plane = math.prod(in_dhw)
    if planes >= MANY_PLANES and plane * element_size <= PLANE_BYTES:
        return plane
    overlap = math.prod(candidates(in_dhw, out_dhw)) > 1
    return (TILE_BYTES if overlap else TILE_BYTES // 2) // element_size


def bounds_table(
    in_dhw: tuple[int, int, int], out_dhw: tuple[int, int, int], device: torch.device, rows: int = 1
) -> torch.Tensor:
    """Per axis (D, H, W): the first output covering each position, then one past the last;
    then the (magic, shift) pairs of DIVISORS (`rows`: the fill-and-scatter's ROWS), int32,
    each magic as the 32-bit pattern of its unsigned value ((0, 0) for 64-bit launches)."""
    parts = []
    for in_size, out_size in zip(in_dhw, out_dhw, strict=True):
        parts += covering_bounds(in_size, out_size)
    (_, h, w), (od, oh, ow) = in_dhw, out_dhw
    sizes = {"W": w, "H": h, "OD": od, "OH": oh, "OW": ow, "ROWS": rows}
    words = divisor_words(tuple(sizes[name] for name in DIVISORS))
    parts.append(torch.tensor(words, dtype=torch.int64))
    return torch.cat(parts).to(device=device, dtype=torch.int32)


def divisor_words(values: tuple[int, ...]) -> list[int]:
    """(magic, shift) of each value as int32 words: the magic as the 32-bit pattern of its
    unsigned value, (0, 0) for a value past 32 bits (64-bit launches divide instead)."""
    words = []
    for value in values:
        magic, shift = divisor(value) if fits_int32(value) else (0, 0)
        words += [magic - 2**32 if magic > INT32_LIMIT else magic, shift]
    return words


def fits_axes(in_dhw: tuple[int, int, int], out_dhw: tuple[int, int, int]) -> bool:
    """Whether the candidate arithmetic (position·O and output·I per axis) fits in 32 bits."""
    return fits_int32(*((i + 1) * (o + 1) for i, o in zip(in_dhw, out_dhw, strict=True)))


def plan_fill_scatter(
    grad5: torch.Tensor,
    idx5: torch.Tensor,
    gin5: torch.Tensor,
    tile: int = 0,
    box: int = 0,
) -> Launch:
    """Launch of the fill-and-scatter kernel for contiguous `gin5` (5-D tensors), walking
    `box` outputs at a time (0: the default)."""
    n, c, d, h, w = gin5.shape
    od, oh, ow = grad5.shape[2:]
    assert gin5.is_contiguous(), "the scatter writes flat offsets into a contiguous gradient"
    tile = tile or default_tile((d, h, w), (od, oh, ow), gin5.element_size(), n * c)
    hw = h * w
    if hw >= tile:
        td, th = 1, max(1, min(h, tile // w))
    else:
        td, th = max(1, min(d, tile // hw)), h
    n_d, n_h = triton.cdiv(d, td), triton.cdiv(h, th)
    vec = vector_width(gin5)
    num_warps = 8 if tile * gin5.element_size() >= 65536 else 4
    reach = max(span(t.shape[2:], t.stride()[2:]) for t in (grad5, idx5))
    # Offsets, positions times output sizes (the bounds) and box lanes must fit in 32 bits.
    wide = not (
        fits_int32(reach, d * hw + tile, (d + td) * oh * ow + 65536)
        and fits_axes((d, h, w), (od, oh, ow))
    )
    # Lanes a box gives each output slice: the most output rows any tile of TH rows meets.
    rows = ow * max(-((-min(h0 + th, h) * oh) // h) - (h0 * oh) // h for h0 in range(0, h, th))
    grid = (n * c * n_d * n_h,)
    scalars = (
        bounds_table((d, h, w), (od, oh, ow), gin5.device, rows),
        c,
        d,
        h,
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
    cd, ch, cw = candidates((d, h, w), (od, oh, ow))
    if not box and not runtime.interpreted:
        # Each output's candidate checks hold registers: with more than two candidates,
        # four outputs a thread took 136 registers, one program a multiprocessor (sm_90);
        # two a thread did best where a program walks a whole plane (H200 sweep).
        whole_plane = td == d and th == h
        box = (128 if cd * ch * cw <= 2 else 64 if whole_plane else 32) * num_warps
    constants = {
        "ACC": tl.float64 if gin5.dtype == torch.float64 else tl.float32,
        "TD": td,
        "TH": th,
        "SPLIT_H": th < h,
        "ZB": 8192 if runtime.interpreted else 256 * num_warps,
        "BOX": box or 4096,
        "CD": cd,
        "CH": ch,
        "CW": cw,
        "VEC": vec,
        "WIDE": wide,
        "num_warps": num_warps,
    }
    return Launch(_fill_scatter_backward_kernel, grid, scalars, constants)


class ZeroedLaunch:
    """The scatter-only kernel's two steps: zero the gradient (the third tensor), then launch."""

    def __init__(self, launch: Launch) -> None:
        self.launch = launch
        self.kernel = launch.kernel

    def __call__(self, *tensors: torch.Tensor) -> None:
        tensors[2].zero_()
        self.launch(*tensors)


def prefers_zeroed(
    in_dhw: tuple[int, int, int], out_dhw: tuple[int, int, int], planes: int
) -> bool:
    """Whether the zero fill and output-parallel scatter beat fill-and-scatter: where windows
    overlap on two axes or more and there are too few planes for a program per plane, tiles
    would share most of their outputs (H200 sweep, docs/performance.md)."""
    return planes < MANY_PLANES and math.prod(candidates(in_dhw, out_dhw)) > 2


def plan_scatter(
    grad5: torch.Tensor,
    idx5: torch.Tensor,
    gin5: torch.Tensor,
    tile: int = 0,
    zeroed: bool | None = None,
    box: int = 0,
) -> Launch | ZeroedLaunch:
    """Fill-and-scatter in one launch, or (where windows overlap on several axes and the
    planes are too few for a program each; or when `zeroed` says so) a zero fill and a
    scatter with a lane per output. `tile`: elements, or outputs when zeroed, per program;
    `box`: outputs the fill-and-scatter kernel walks at a time."""
    in_dhw, out_dhw = tuple(gin5.shape[2:]), tuple(grad5.shape[2:])
    if zeroed is None:
        zeroed = prefers_zeroed(in_dhw, out_dhw, gin5.shape[0] * gin5.shape[1])  # type: ignore[arg-type]
    if zeroed:
        return plan_scatter_outputs(grad5, idx5, gin5, tile)
    return plan_fill_scatter(grad5, idx5, gin5, tile, box)


def plan_scatter_outputs(
    grad5: torch.Tensor, idx5: torch.Tensor, gin5: torch.Tensor, block: int = 0
) -> ZeroedLaunch:
    """Zero fill, then the output-parallel scatter (`block` outputs per program), for
    contiguous `gin5` (5-D tensors)."""
    n, c, d, h, w = gin5.shape
    od, oh, ow = grad5.shape[2:]
    assert gin5.is_contiguous(), "the scatter writes flat offsets into a contiguous gradient"
    total = n * c * od * oh * ow
    block = block or (4096 if runtime.interpreted else 512)
    reach = max(span(t.shape, t.stride()) for t in (grad5, idx5))
    wide = not (
        fits_int32(reach, total + block, gin5.numel()) and fits_axes((d, h, w), (od, oh, ow))
    )
    scalars = (
        bounds_table((d, h, w), (od, oh, ow), gin5.device),
        c,
        d,
        h,
        w,
        od,
        oh,
        ow,
        grad5.stride(),
        idx5.stride(),
        total,
    )
    cd, ch, cw = candidates((d, h, w), (od, oh, ow))
    constants = {
        "ACC": tl.float64 if gin5.dtype == torch.float64 else tl.float32,
        "BLOCK": block,
        "CD": cd,
        "CH": ch,
        "CW": cw,
        "WIDE": wide,
        "num_warps": max(1, min(8, block // 128)),
    }
    grid = (triton.cdiv(total, block),)
    return ZeroedLaunch(Launch(_scatter_outputs_kernel, grid, scalars, constants))
