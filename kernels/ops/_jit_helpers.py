"""Small Triton helpers the kernels share (Triton inlines them where they are called)."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def window(o, in_size, out_size):
    """Output `o`'s window along one axis: [floor(o·I/O), ceil((o+1)·I/O))."""
    return (o * in_size) // out_size, ((o + 1) * in_size + out_size - 1) // out_size


@triton.jit
def div_by(x, divisor, WIDE: tl.constexpr):
    """x // d for x >= 0, `divisor` the tuple (d, magic, shift) of `_adaptive.divisor(d)`: a
    multiply-high and a shift where x is 32-bit (x < 2^31), a division where WIDE."""
    if WIDE:
        return x // divisor[0]
    else:
        hi = tl.umulhi(x.to(tl.uint32) * 2, divisor[1].to(tl.uint32))
        return (hi >> divisor[2]).to(x.dtype)


@triton.jit
def unflatten3(j, MID, LAST):
    """A flat number over three axes (last fastest) -> its three coordinates."""
    last = j % LAST
    rest = j // LAST
    return rest // MID, rest % MID, last


@triton.jit
def unflatten4(j, B, C, D):
    """A flat number over four axes (last fastest) -> its four coordinates."""
    rest, c, d = unflatten3(j, C, D)
    return rest // B, rest % B, c, d


@triton.jit
def keep_first_max(v, step, best, best_step, nan_step):
    """One step of a scan-order walk: `>` keeps the first maximum; NaN tracked apart (the
    last NaN's step)."""
    take = v > best
    return (
        tl.where(take, v, best),
        tl.where(take, step, best_step),
        tl.where(v != v, step, nan_step),
    )


@triton.jit
def merge_lanes(best, pos, BIG: tl.constexpr, AXIS: tl.constexpr):
    """Lanes' running (maximum, position) pairs -> one per row along AXIS, as PyTorch picks:
    the last NaN if any lane holds one, else the first maximum (smallest position; lanes
    still at BIG saw nothing)."""
    nan = best != best
    nan_pos = tl.max(tl.where(nan, pos, -1), axis=AXIS)
    clean = tl.where(nan, float("-inf"), best)
    top = tl.max(clean, axis=AXIS)
    hit = (clean == tl.expand_dims(top, AXIS)) & (pos != BIG)
    first = tl.min(tl.where(hit, pos, BIG), axis=AXIS)
    has_nan = nan_pos >= 0
    return tl.where(has_nan, float("nan"), top), tl.where(has_nan, nan_pos, first)
