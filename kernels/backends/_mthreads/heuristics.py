"""Moore Threads heuristics: the generic kernels' on a MUSA device, and the override's tiles.

The generic kernels (the forward, and the scatters the override shares) take the rules the
H200 sweeps found (`kernels.backends._nvidia.heuristics`), scaled by the MUSA device's
multiprocessor count; they were not swept on MUSA hardware. The override's own kernels
(expand, gather) take `Tiles`: one depth slice of about 4096 elements a program on a device,
as much as fits under Triton's interpreter.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kernels import runtime
from kernels.backends._nvidia.heuristics import for_device
from kernels.heuristics import Heuristics
from kernels.ops._adaptive import next_pow2


def heuristics() -> Heuristics:
    """The generic kernels' heuristics on the current MUSA device."""
    musa = torch.musa  # type: ignore[attr-defined]  (torch_musa registers it)
    return for_device(musa.get_device_properties(musa.current_device()))


@dataclass(frozen=True)
class Tiles:
    """How the override's kernels tile a gradient."""

    elements: int  # elements a program
    row_width: int  # widest tile along W
    pack_depth: bool  # a program may take several depth slices (else one)
    max_warps: int  # a warp per 256 elements, up to this many


DEVICE = Tiles(elements=4096, row_width=128, pack_depth=False, max_warps=8)
INTERPRETER = Tiles(elements=32768, row_width=1024, pack_depth=True, max_warps=1)


def tiles() -> Tiles:
    """The override's tiles on this process's device."""
    return INTERPRETER if runtime.interpreted else DEVICE


@dataclass(frozen=True)
class Tile:
    """BD depth slices × BH rows × BW columns a program, and its warps."""

    bd: int
    bh: int
    bw: int
    num_warps: int


def tile(d: int, h: int, w: int, t: Tiles) -> Tile:
    """The tile of a D×H×W gradient under `t`: as wide along W as the row allows, then rows,
    then (with `pack_depth`) depth slices."""
    bw = min(next_pow2(w), t.row_width)
    bh = min(next_pow2(h), max(1, t.elements // bw))
    bd = min(next_pow2(d), max(1, t.elements // (bw * bh))) if t.pack_depth else 1
    return Tile(bd, bh, bw, max(1, min(t.max_warps, bh * bw // 256)))
