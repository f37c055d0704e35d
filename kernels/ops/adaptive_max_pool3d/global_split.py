"""The global_split kernels of adaptive_max_pool3d: global pooling (output 1×1×1) of
contiguous planes as a split reduction, in two launches.

One program per (n, c) plane leaves most of the device idle while it walks 50 k elements
(512 planes on 132 SMs ran at 5.5× the memory floor), so each plane's flat range is split
into S contiguous parts. The first kernel reduces a part with vector loads: each lane keeps
its own running maximum (positions only grow, so `>` keeps the lane's first maximum and a
NaN replaces: the last NaN), then the lanes merge into one (value, position). The second
kernel merges each plane's S parts by position, so the split does not change the answer:
PyTorch's first maximum in (d, h, w) order, and the last NaN where there is one.

The dispatch sends it only planes too long for global_groups (whose merge holds a plane's
group maxima in one tile): global_groups keeps no positions while it reads, and took 2.05×
the floor on the fp16 benchmark row where this kernel took 2.58×.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
import triton
import triton.language as tl

from kernels.heuristics import Heuristics
from kernels.launch import Launch, TwoLaunches
from kernels.ops._adaptive import Forward, accumulator_dtype, allocator, fits_int32, merge_lanes

NAME = "global_split"


@triton.jit
def global_split_parts_kernel(
    x_ptr,
    part_val_ptr,
    part_pos_ptr,
    L,
    part,
    S,
    ACC: tl.constexpr,
    BLOCK: tl.constexpr,
    WIDE: tl.constexpr,
):
    pid = tl.program_id(0)
    plane = pid // S
    IDX: tl.constexpr = tl.int64 if WIDE else tl.int32
    BIG: tl.constexpr = 2**62 if WIDE else 2**31 - 1
    start = (pid % S).to(IDX) * part
    end = tl.minimum(start + part, L)
    x_plane = x_ptr + plane.to(tl.int64) * L
    lanes = tl.arange(0, BLOCK)
    best = tl.full([BLOCK], float("-inf"), ACC)
    pos = tl.full([BLOCK], BIG, IDX)
    for offset in range(start, end, BLOCK):
        p = offset + lanes
        ok = p < end
        v = tl.load(x_plane + p, mask=ok, other=float("-inf")).to(ACC)
        take = ok & ((v > best) | (v != v) | (pos == BIG))
        best = tl.where(take, v, best)
        pos = tl.where(take, p, pos)
    value, where = merge_lanes(best[None, :], pos[None, :], BIG, 1)
    one = pid + tl.arange(0, 1)
    tl.store(part_val_ptr + one, value)
    tl.store(part_pos_ptr + one, where.to(tl.int64))


@triton.jit
def global_split_merge_kernel(
    part_val_ptr,
    part_pos_ptr,
    out_ptr,
    idx_ptr,
    planes,
    S,
    BP: tl.constexpr,
    BS: tl.constexpr,
):
    plane = tl.program_id(0) * BP + tl.arange(0, BP)
    s = tl.arange(0, BS)
    ok = (plane < planes)[:, None] & (s < S)[None, :]
    offs = plane.to(tl.int64)[:, None] * S + s[None, :]
    best = tl.load(part_val_ptr + offs, mask=ok, other=float("-inf"))
    pos = tl.load(part_pos_ptr + offs, mask=ok, other=2**62)
    value, where = merge_lanes(best, pos, 2**62, 1)
    live = plane < planes
    tl.store(out_ptr + plane, value.to(out_ptr.dtype.element_ty), mask=live)
    tl.store(idx_ptr + plane, where, mask=live)


@dataclass(frozen=True)
class Config:
    """Parts a plane (0: enough for about `Heuristics.global_programs` programs), lanes a load,
    warps."""

    kernel: ClassVar[str] = NAME
    parts: int
    block: int
    num_warps: int


def fits(p: Forward) -> bool:
    """Global pooling of a tensor whose (n, c) planes are contiguous, one after another."""
    return p.out == (1, 1, 1) and p.x.is_contiguous()


def default(p: Forward, h: Heuristics) -> Config:
    """Planes split into parts until about `h.global_programs` programs (none shorter than
    four loads), `h.global_block` lanes a load."""
    return Config(0, h.global_block, h.global_warps)


def plan(p: Forward, split: Config, h: Heuristics) -> TwoLaunches:
    """Launches for global pooling of the contiguous 5-D input (see `fits`)."""
    if not fits(p):
        raise ValueError("the global_split kernels need global pooling of contiguous planes")
    x = p.x
    n, c = x.shape[:2]
    planes, length = n * c, x[0, 0].numel()
    block = split.block
    parts = split.parts or max(
        1, min(triton.cdiv(h.global_programs, planes), length // (4 * block))
    )
    # Parts start on whole blocks, so each load of an aligned plane is aligned too.
    part = triton.cdiv(triton.cdiv(length, parts), block) * block
    parts = triton.cdiv(length, part)
    wide = not fits_int32(length + block)
    first = Launch(
        global_split_parts_kernel,
        (planes * parts,),
        (length, part, parts),
        {"ACC": p.acc, "BLOCK": block, "WIDE": wide, "num_warps": split.num_warps},
    )
    bs = triton.next_power_of_2(parts)
    bp = max(1, min(triton.next_power_of_2(planes), 1024 // bs))
    merge = Launch(
        global_split_merge_kernel,
        (triton.cdiv(planes, bp),),
        (planes, parts),
        {"BP": bp, "BS": bs, "num_warps": 4},
    )
    # Each part's (value, position) into scratch buffers, then the merge of a plane's parts.
    values = allocator((planes, parts), accumulator_dtype(x.dtype), x.device)
    positions = allocator((planes, parts), torch.int64, x.device)
    return TwoLaunches(first, merge, (values, positions))
