"""The global_groups kernels of adaptive_max_pool3d: global pooling (output 1×1×1) of
contiguous planes as values first, the position after, in two launches.

The first kernel reads every element once and keeps no positions: each program loads ROWS
groups of G consecutive elements of one plane as one tile and stores each group's maximum
(a NaN anywhere makes it NaN). That is a read and a plain maximum, what a copy-speed read
can afford; tracking a position per lane costs about five times the instructions.
The second kernel takes each plane's group maxima, picks the group that holds PyTorch's
answer (the last group with a NaN if any, else the first group whose maximum is the plane's)
and reads that one group again to find the position: the last NaN, else the first element
equal to the maximum. The value stored is the element at that position, so a maximum that is
a zero keeps its sign as the scan order found it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import triton
import triton.language as tl

from kernels.heuristics import Heuristics
from kernels.launch import Launch, TwoLaunches
from kernels.ops._adaptive import Forward, accumulator_dtype, allocator, fits_int32

NAME = "global_groups"

# The pick kernel holds a plane's group maxima in one tile: planes of at most this many
# groups (longer planes take global_split).
MAX_GROUPS = 4096


@triton.jit
def _max_nan(a, b):
    """The larger of two, NaN if either is (the group maxima's combine)."""
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def global_groups_kernel(
    x_ptr,
    groups_ptr,
    L,
    NG,
    chunks,
    ACC: tl.constexpr,
    ROWS: tl.constexpr,
    G: tl.constexpr,
    WIDE: tl.constexpr,
    COMBINE: tl.constexpr,
):
    pid = tl.program_id(0)
    plane = pid // chunks
    IDX: tl.constexpr = tl.int64 if WIDE else tl.int32
    group = (pid % chunks).to(IDX) * ROWS + tl.arange(0, ROWS)
    offs = group[:, None] * G + tl.arange(0, G)[None, :]
    v = tl.load(x_ptr + plane.to(tl.int64) * L + offs, mask=offs < L, other=float("-inf"))
    v = v.to(ACC)
    if COMBINE:  # one NaN-propagating maximum: what the H200 measurements ran
        top = tl.reduce(v, 1, _max_nan)
    else:  # the same answer where a custom combine is slow (`Heuristics.custom_reduce`)
        top = tl.where(tl.max((v != v).to(tl.int32), 1) > 0, float("nan"), tl.max(v, 1))
    tl.store(groups_ptr + plane.to(tl.int64) * NG + group, top, mask=group < NG)


@triton.jit
def global_groups_pick_kernel(
    x_ptr,
    groups_ptr,
    out_ptr,
    idx_ptr,
    planes,
    L,
    NG,
    ACC: tl.constexpr,
    BP: tl.constexpr,
    BNG: tl.constexpr,
    G: tl.constexpr,
    WIDE: tl.constexpr,
):
    IDX: tl.constexpr = tl.int64 if WIDE else tl.int32
    BIG: tl.constexpr = 2**62 if WIDE else 2**31 - 1
    plane = tl.program_id(0) * BP + tl.arange(0, BP)
    live = plane < planes
    j = tl.arange(0, BNG)
    ok = live[:, None] & (j < NG)[None, :]
    tops = tl.load(groups_ptr + plane.to(tl.int64)[:, None] * NG + j[None, :], mask=ok, other=0)
    nan = ok & (tops != tops)
    last_nan = tl.max(tl.where(nan, j[None, :], -1), axis=1)
    clean = tl.where(ok & ~nan, tops, float("-inf"))
    top = tl.max(clean, axis=1)
    first = tl.min(tl.where(ok & (clean == top[:, None]), j[None, :], BNG - 1), axis=1)
    has_nan = last_nan >= 0
    winner = tl.where(has_nan, last_nan, first).to(IDX)

    offs = winner[:, None] * G + tl.arange(0, G)[None, :]
    inside = live[:, None] & (offs < L)
    x_plane = x_ptr + plane.to(tl.int64) * L
    v = tl.load(x_plane[:, None] + offs, mask=inside, other=0).to(ACC)
    nan_pos = tl.max(tl.where(inside & (v != v), offs, -1), axis=1)
    top_pos = tl.min(tl.where(inside & (v == top[:, None]), offs, BIG), axis=1)
    pos = tl.where(has_nan, nan_pos, top_pos)
    pos = tl.where(live, pos, 0)
    value = tl.load(x_plane + pos, mask=live)
    tl.store(out_ptr + plane, value, mask=live)
    tl.store(idx_ptr + plane, pos.to(tl.int64), mask=live)


@dataclass(frozen=True)
class Config:
    """ROWS groups of G elements a program of the first kernel, its warps."""

    kernel: ClassVar[str] = NAME
    rows: int
    group: int
    num_warps: int


def fits(p: Forward, group: int) -> bool:
    """Global pooling of a tensor whose (n, c) planes are contiguous, one after another, and
    of at most MAX_GROUPS groups of `group` elements."""
    x = p.x
    return (
        p.out == (1, 1, 1)
        and x.is_contiguous()
        and triton.cdiv(math.prod(x.shape[2:]), group) <= MAX_GROUPS
    )


def default(p: Forward, h: Heuristics) -> Config:
    """The device's tile for the first kernel (`Heuristics.global_groups`)."""
    rows, group, warps = h.global_groups
    return Config(rows, group, warps)


def plan(p: Forward, cfg: Config, h: Heuristics) -> TwoLaunches:
    """Launches for global pooling of the contiguous 5-D input (see `fits`)."""
    x = p.x
    planes, length = x.shape[0] * x.shape[1], math.prod(x.shape[2:])
    group = min(cfg.group, triton.next_power_of_2(length))
    if not fits(p, group):
        raise ValueError(
            "the global_groups kernels need global pooling of contiguous planes of at most"
            f" {MAX_GROUPS} groups"
        )
    n_groups = triton.cdiv(length, group)
    rows = min(cfg.rows, triton.next_power_of_2(n_groups))
    chunks = triton.cdiv(n_groups, rows)
    wide = not fits_int32(chunks * rows * group + group)
    first = Launch(
        global_groups_kernel,
        (planes * chunks,),
        (length, n_groups, chunks),
        {
            "ACC": p.acc,
            "ROWS": rows,
            "G": group,
            "WIDE": wide,
            "COMBINE": h.custom_reduce,
            "num_warps": cfg.num_warps,
        },
    )
    bng = triton.next_power_of_2(n_groups)
    bp = max(1, min(triton.next_power_of_2(planes), 1024 // max(bng, group)))
    pick = Launch(
        global_groups_pick_kernel,
        (triton.cdiv(planes, bp),),
        (planes, length, n_groups),
        {"ACC": p.acc, "BP": bp, "BNG": bng, "G": group, "WIDE": wide, "num_warps": 4},
    )
    # Group maxima into a scratch buffer, then the pick reads them and the winning groups.
    tops = allocator((planes, n_groups), accumulator_dtype(x.dtype), x.device)
    return TwoLaunches(first, pick, (tops,), merge_reads_input=True)
