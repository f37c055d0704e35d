"""Global adaptive max pooling (output 1×1×1) of contiguous planes: a split reduction.

One program per (n, c) plane leaves most of the device idle while it walks 50 k elements
(512 planes on 132 SMs ran at 5.5× the memory floor), so each plane's flat range is split
into S contiguous parts. The first kernel reduces a part with vector loads, UNROLL blocks a
step in one load (several 16-byte loads a thread in flight): each lane keeps only its largest
value and the step that first raised it (`>`: the first maximum), and the last step that held
a NaN; a few instructions an element instead of tracking a position per element. At the end
each lane reloads the deciding step's elements to find the position, then the lanes merge
into one (value, position). The second
kernel merges each plane's S parts by position, so the split does not change the answer:
PyTorch's first maximum in (d, h, w) order, and the last NaN where there is one.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from kernels import runtime
from kernels.launch import Launch
from kernels.ops._adaptive import fits_int32
from kernels.ops._jit_helpers import merge_lanes


@triton.jit
def _global_parts_kernel(
    x_ptr,
    part_val_ptr,
    part_pos_ptr,
    L,
    part,
    S,
    ACC: tl.constexpr,
    BLOCK: tl.constexpr,
    UNROLL: tl.constexpr,
    VEC: tl.constexpr,
    WIDE: tl.constexpr,
):
    pid = tl.program_id(0)
    plane = pid // S
    IDX: tl.constexpr = tl.int64 if WIDE else tl.int32
    BIG: tl.constexpr = 2**62 if WIDE else 2**31 - 1
    start = (pid % S).to(IDX) * part
    end = tl.minimum(start + part, L)
    x_plane = x_ptr + plane.to(tl.int64) * L
    # A step is UNROLL blocks of BLOCK elements; each lane owns VEC contiguous elements of
    # every block (one 16-byte load a block), all of a step's loads in flight at once.
    LANES: tl.constexpr = BLOCK // VEC
    STEP: tl.constexpr = BLOCK * UNROLL
    tile = (
        tl.arange(0, UNROLL)[:, None, None] * BLOCK
        + tl.arange(0, LANES)[None, :, None] * VEC
        + tl.arange(0, VEC)[None, None, :]
    )
    # Per lane: the largest value, the first step (offset) that raised it, and the last
    # step that held a NaN; positions are found once, at the end.
    best = tl.full([LANES], float("-inf"), ACC)
    best_at = tl.zeros([LANES], IDX) + start
    nan_at = tl.full([LANES], -1, IDX)
    full_end = start + (end - start) // STEP * STEP
    for offset in range(start, full_end + STEP, STEP):
        p = offset + tile
        if offset < full_end:  # whole steps unmasked; the part's tail masked
            v = tl.load(x_plane + p).to(ACC)
        else:
            v = tl.load(x_plane + p, mask=p < end, other=float("-inf")).to(ACC)
        # Where a step holds a NaN the answer is a NaN whatever `top` is (a max may or may not
        # propagate NaN): `best` only matters for planes without one.
        top = tl.max(tl.max(v, axis=2), axis=0)
        raised = top > best
        best = tl.where(raised, top, best)
        best_at = tl.where(raised, offset, best_at)
        nan = tl.max(tl.max((v != v).to(tl.int8), axis=2), axis=0)
        nan_at = tl.where(nan > 0, offset, nan_at)
    # Back to the steps that decided, for positions: the first element equal to the best,
    # or the last NaN (one more load a lane, of lines read moments ago).
    # Steps start on whole vectors (parts start on lines, blocks are whole vectors).
    p = tl.multiple_of(best_at, VEC)[None, :, None] + tile
    v = tl.load(x_plane + p, mask=p < end, other=float("-inf")).to(ACC)
    hit = (p < end) & (v == best[None, :, None])
    pos = tl.min(tl.min(tl.where(hit, p, BIG), axis=2), axis=0)
    has_nan = nan_at >= 0
    p = tl.multiple_of(tl.where(has_nan, nan_at, start), VEC)[None, :, None] + tile
    v = tl.load(x_plane + p, mask=p < end, other=0.0).to(ACC)
    last_nan = tl.max(tl.max(tl.where((p < end) & (v != v), p, -1), axis=2), axis=0)
    pos = tl.where(has_nan, last_nan, pos)
    best = tl.where(has_nan, float("nan"), best)
    value, where = merge_lanes(best[None, :], pos[None, :], BIG, 1)
    one = pid + tl.arange(0, 1)
    tl.store(part_val_ptr + one, value)
    tl.store(part_pos_ptr + one, where.to(tl.int64))


@triton.jit
def _global_merge_kernel(
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
class GlobalSplit:
    """Parts per plane (0: enough for about TARGET_PROGRAMS programs), lanes per load (0:
    2048, the H200 sweep's best with 8 warps), warps, loads in flight a lane (0: UNROLL)."""

    parts: int = 0
    block: int = 0
    num_warps: int = 8
    unroll: int = 0


# Blocks a program loads before it compares any (16-byte loads a thread in flight).
UNROLL = 4
ALIGN = 64  # elements a part's start is a multiple of


# H200: 132 SMs; a few programs on each keep the loads in flight.
TARGET_PROGRAMS = 2048


def applies(x: torch.Tensor, out_dhw: tuple[int, int, int]) -> bool:
    """Global pooling of a tensor whose (n, c) planes are contiguous, one after another."""
    return out_dhw == (1, 1, 1) and x.is_contiguous()


class GlobalLaunch:
    """The two launches: parts into a scratch buffer, then the merge into (out, indices)."""

    def __init__(self, parts: Launch, merge: Launch, shape: tuple[int, int], acc: torch.dtype):
        self.parts, self.merge, self.kernel = parts, merge, parts.kernel
        self.shape, self.acc = shape, acc

    def __call__(self, x: torch.Tensor, out: torch.Tensor, indices: torch.Tensor) -> None:
        part_val = torch.empty(self.shape, dtype=self.acc, device=x.device)
        part_pos = torch.empty(self.shape, dtype=torch.int64, device=x.device)
        self.parts(x, part_val, part_pos)
        self.merge(part_val, part_pos, out, indices)


def plan_global(x: torch.Tensor, split: GlobalSplit | None = None) -> GlobalLaunch:
    """Launches for global pooling of the contiguous 5-D `x` (see `applies`)."""
    split = split or GlobalSplit()
    n, c = x.shape[:2]
    planes, length = n * c, x[0, 0].numel()
    block = split.block or (4096 if runtime.interpreted else 2048)
    unroll = split.unroll or (1 if runtime.interpreted else UNROLL)
    step = block * unroll
    parts = split.parts or max(1, min(triton.cdiv(TARGET_PROGRAMS, planes), length // step))
    # Parts start on multiples of 64 elements, so each load of an aligned plane is aligned too.
    part = triton.cdiv(triton.cdiv(length, parts), ALIGN) * ALIGN
    parts = triton.cdiv(length, part)
    acc = torch.float64 if x.dtype == torch.float64 else torch.float32
    wide = not fits_int32(length + step)
    first = Launch(
        _global_parts_kernel,
        (planes * parts,),
        (length, part, parts),
        {
            "ACC": tl.float64 if acc == torch.float64 else tl.float32,
            "BLOCK": block,
            "UNROLL": unroll,
            "VEC": min(block, max(1, 16 // x.element_size())),
            "WIDE": wide,
            "num_warps": split.num_warps,
        },
    )
    bs = triton.next_power_of_2(parts)
    bp = max(1, min(triton.next_power_of_2(planes), 1024 // bs))
    merge = Launch(
        _global_merge_kernel,
        (triton.cdiv(planes, bp),),
        (planes, parts),
        {"BP": bp, "BS": bs, "num_warps": 4},
    )
    return GlobalLaunch(first, merge, (planes, parts), acc)
