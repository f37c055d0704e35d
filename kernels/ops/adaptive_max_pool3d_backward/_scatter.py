"""What the two scatter kernels of adaptive_max_pool3d_backward share (fill_scatter and
zeroed_scatter): the sum of an element's gradients over the overlapping windows that chose
it, and the host's table of window bounds and divisors.

Deterministic without atomics: an element chosen by several overlapping windows is written
once, by the first of them in (od, oh, ow) order, with the sum of all their gradients: its own
first, then the others' in a fixed order (fp32, fp64 for fp64). Only axes whose windows
overlap (I % O != 0) have such neighbours; the dispatch table bounds their count and sends
shapes with too many (steep upsampling) to the rows kernel.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.ops._adaptive import (
    INT32_LIMIT,
    covering_bounds,
    div_by,
    divisor,
    fits_int32,
)

# After the bounds, the table holds (magic, shift) pairs (`_adaptive.divisor`) for these
# divisors, in this order: the kernels divide by them without a runtime division.
DIVISORS = ("W", "H", "OD", "OH", "OW", "ROWS")


@triton.jit
def divisor_of(bounds_ptr, D, H, W, value, k: tl.constexpr):
    """(value, magic, shift) of the k-th of DIVISORS, for `div_by`."""
    at = bounds_ptr + 2 * (D + H + W) + 2 * k
    return value, tl.load(at), tl.load(at + 1)


@triton.jit
def divisors_of(bounds_ptr, D, H, W, OD, OH, OW):
    """The divisors `sum_once` needs, read once from the table: W, H, OD, OH, OW."""
    return (
        divisor_of(bounds_ptr, D, H, W, W, 0),
        divisor_of(bounds_ptr, D, H, W, H, 1),
        divisor_of(bounds_ptr, D, H, W, OD, 2),
        divisor_of(bounds_ptr, D, H, W, OH, 3),
        divisor_of(bounds_ptr, D, H, W, OW, 4),
    )


@triton.jit
def candidates_of(
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
        back, ahead = _sides(o, p, size, by_o, WIDE)
        return o - back.to(o.dtype), o + 1 + ahead.to(o.dtype)
    else:
        first = tl.load(bounds_ptr + first_at + p, mask=mine, other=0).to(o.dtype)
        last = tl.load(bounds_ptr + last_at + p, mask=mine, other=0).to(o.dtype)
        return first, last


@triton.jit
def sum_once(
    idx_base, grad_base, bounds_ptr, divisors, chosen, g, mine, od, oh, ow,
    D, H, W, sid, sih, siw, sgd, sgh, sgw,
    ACC: tl.constexpr, CD: tl.constexpr, CH: tl.constexpr, CW: tl.constexpr,
    WIDE: tl.constexpr,
):  # fmt: skip
    """(value, writer) for outputs (od, oh, ow) whose argmax `chosen` is theirs to store.

    Every other output whose window holds the chosen element and chose it too adds its
    gradient to the value, and only the first of them all in (od, oh, ow) order writes. On an
    axis without overlaps (C = 1) the only candidate is the output's own. bounds_ptr holds,
    per axis, the first output covering each position, then one past the last; `divisors`
    are `divisors_of`'s. Indices must come from the forward (in their own window).
    """
    if CD * CH * CW == 1:
        return g.to(ACC), mine
    pd, ph, pw = split_position(chosen, divisors, H, W, WIDE)
    if CD <= 2 and CH <= 2 and CW <= 2:
        own_i = od * sid + oh * sih + ow * siw
        own_g = od * sgd + oh * sgh + ow * sgw
        return _sum_neighbours(
            idx_base, grad_base, divisors, chosen, g, mine, od, oh, ow, pd, ph, pw, own_i,
            own_g, D, H, W, sid, sih, siw, sgd, sgh, sgw, ACC, CD, CH, CW, False, WIDE,
        )  # fmt: skip
    return _sum_candidates(
        idx_base, grad_base, bounds_ptr, divisors, chosen, g, mine, od, oh, ow, pd, ph, pw,
        D, H, W, sid, sih, siw, sgd, sgh, sgw, ACC, CD, CH, CW, WIDE,
    )  # fmt: skip


@triton.jit
def sum_in_box(
    chosen, g, mine, lanes, od, oh, ow, divisors, D, H, W, ROWS, OW,
    ACC: tl.constexpr, CD: tl.constexpr, CH: tl.constexpr, CW: tl.constexpr,
    WIDE: tl.constexpr,
):  # fmt: skip
    """`sum_once` where one box holds every output a program walks, lane `lanes` the output
    (od, oh, ow) at (slice, row, column) of the box (ROWS lanes a slice, OW a row), and at
    most two candidates an axis: each neighbouring candidate's index and gradient is the
    box's own, taken at its lane (`tl.gather`) instead of loaded. A neighbour that chose an
    element of the program's tile has a window meeting the tile, so it is in the box."""
    if CD * CH * CW == 1:
        return g.to(ACC), mine
    pd, ph, pw = split_position(chosen, divisors, H, W, WIDE)
    return _sum_neighbours(
        chosen, g, divisors, chosen, g, mine, od, oh, ow, pd, ph, pw, lanes, lanes, D, H, W,
        ROWS, OW, 1, ROWS, OW, 1, ACC, CD, CH, CW, True, WIDE,
    )  # fmt: skip


@triton.jit
def split_position(chosen, divisors, H, W, WIDE: tl.constexpr):
    """A flat position in the (D, H, W) volume as (d, h, w), by `divisors_of`'s W and H."""
    row = div_by(chosen, divisors[0], WIDE)
    d = div_by(row, divisors[1], WIDE)
    return d, row - d * H, chosen - row * W


@triton.jit
def _sides(o, p, size, by_o, WIDE: tl.constexpr):
    """Along an axis of at most two candidates a position: whether p, in output o's window,
    also lies in o - 1's (its window ends after p) and whether in o + 1's (it starts at or
    before p). Never both: that would be three candidates."""
    prev_end = div_by(o * size + by_o[0] - 1, by_o, WIDE)
    next_start = div_by((o + 1) * size, by_o, WIDE)
    return p < prev_end, p >= next_start


@triton.jit
def _neighbour(o, p, size, by_o, s_idx, s_grad, WIDE: tl.constexpr):
    """Along an axis of at most two candidates: (whether p lies in a neighbouring output's
    window too, whether that is o - 1's, and the step to it in the indices and the gradient)."""
    back, ahead = _sides(o, p, size, by_o, WIDE)
    return back | ahead, back, tl.where(back, -s_idx, s_idx), tl.where(back, -s_grad, s_grad)


@triton.jit
def _step(axis, valid, at_i, at_g):
    """One `_neighbour` step more on a combination: (valid, index offset, gradient offset,
    whether this step, the combination's first in (od, oh, ow) order so far, is backwards)."""
    has, back, step_i, step_g = axis
    return valid & has, at_i + step_i, at_g + step_g, back


@triton.jit
def _sum_neighbours(
    idx_base, grad_base, divisors, chosen, g, mine, od, oh, ow, pd, ph, pw, own_i, own_g,
    D, H, W, sid, sih, siw, sgd, sgh, sgw,
    ACC: tl.constexpr, CD: tl.constexpr, CH: tl.constexpr, CW: tl.constexpr,
    IN_BOX: tl.constexpr, WIDE: tl.constexpr,
):  # fmt: skip
    """`sum_once` where every axis has at most two candidates: along each overlapping axis
    the chosen element has at most one neighbouring output (`_neighbour`), so the other
    candidates are the (up to seven) combinations of those steps. Each is a fixed step from
    the output's own entry (`own_i` in the indices, `own_g` in the gradient); it comes first
    iff its first step is backwards. IN_BOX: the bases are the box's own indices and
    gradients (`sum_in_box`), the entries lanes of it."""
    by_od, by_oh, by_ow = divisors[2], divisors[3], divisors[4]
    if CD == 2:
        along_d = _neighbour(od, pd, D, by_od, sid, sgd, WIDE)
    if CH == 2:
        along_h = _neighbour(oh, ph, H, by_oh, sih, sgh, WIDE)
    if CW == 2:
        along_w = _neighbour(ow, pw, W, by_ow, siw, sgw, WIDE)
    value = g.to(ACC)
    shared_before = chosen != chosen
    for a in tl.static_range(CD):
        for b in tl.static_range(CH):
            for c in tl.static_range(CW):
                if a + b + c > 0:
                    valid, at_i, at_g = mine, own_i, own_g
                    # The last step applied is the combination's first in (od, oh, ow) order.
                    if c == 1:
                        valid, at_i, at_g, before = _step(along_w, valid, at_i, at_g)
                    if b == 1:
                        valid, at_i, at_g, before = _step(along_h, valid, at_i, at_g)
                    if a == 1:
                        valid, at_i, at_g, before = _step(along_d, valid, at_i, at_g)
                    if IN_BOX:
                        lane = tl.where(valid, at_i, own_i).to(tl.int32)
                        other = tl.where(valid, tl.gather(idx_base, lane, 0), -1)
                        other_g = tl.where(valid, tl.gather(grad_base, lane, 0), 0.0)
                    else:
                        other = tl.load(idx_base + at_i, mask=valid, other=-1)
                        other_g = tl.load(grad_base + at_g, mask=valid, other=0.0)
                    other = other.to(chosen.dtype)
                    same = valid & (other == chosen)
                    shared_before = shared_before | (same & before)
                    value += tl.where(same, other_g.to(ACC), 0.0)
    return value, mine & ~shared_before


@triton.jit
def _sum_candidates(
    idx_base, grad_base, bounds_ptr, divisors, chosen, g, mine, od, oh, ow, pd, ph, pw,
    D, H, W, sid, sih, siw, sgd, sgh, sgw,
    ACC: tl.constexpr, CD: tl.constexpr, CH: tl.constexpr, CW: tl.constexpr,
    WIDE: tl.constexpr,
):  # fmt: skip
    """`sum_once` for any candidates: every output whose window holds the chosen element, in
    (od, oh, ow) order, checked against the output's own place in that order."""
    _, _, by_od, by_oh, by_ow = divisors
    fd, ld = candidates_of(od, pd, D, by_od, bounds_ptr, 0, D, mine, CD, WIDE)
    fh, lh = candidates_of(oh, ph, H, by_oh, bounds_ptr, 2 * D, 2 * D + H, mine, CH, WIDE)
    at = 2 * D + 2 * H
    fw, lw = candidates_of(ow, pw, W, by_ow, bounds_ptr, at, at + W, mine, CW, WIDE)
    value = g.to(ACC)
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
                seen_self = seen_self | (valid & is_self)
                value += tl.where(same, other_g.to(ACC), 0.0)
    return value, seen_self & ~shared_before


def bounds_table(
    in_dhw: tuple[int, int, int], out_dhw: tuple[int, int, int], device: torch.device, rows: int = 1
) -> torch.Tensor:
    """Per axis (D, H, W): the first output covering each position, then one past the last;
    then the (magic, shift) pairs of DIVISORS (`rows`: the fill_scatter's ROWS), int32,
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
