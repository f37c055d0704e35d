"""The expand kernel of the Moore Threads backward: every axis divides and the H and W
windows are powers of two within the tile (the seed's fast path).

The windows tile the input disjointly: one launch on a 2-D grid ((plane, depth), block of
H·W) reads each window's argmax at output resolution, repeats it over the window in
registers and writes the gradient or zero with vector stores (the host passes the gradient's
strides divided by VEC, so the compiler can prove 16-byte alignment): no zero pass, no
atomics. Depth blocks of a plane are neighbours in launch order, so the depth slices that
share output rows run together.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

import triton
import triton.language as tl

from kernels.backends._mthreads.heuristics import Tile, tile, tiles
from kernels.backends._mthreads.ops.adaptive_max_pool3d_backward._launch import launch
from kernels.heuristics import Heuristics
from kernels.launch import Launch
from kernels.ops._adaptive import Backward, dividing_windows, vector_width

NAME = "expand"


@triton.jit
def expand_kernel(
    grad_ptr,
    idx_ptr,
    gin_ptr,
    C,
    D,
    H,
    W,
    W_vec,
    HW,
    OD,
    OH,
    OW,
    grad_strides,
    idx_strides,
    son_vec,
    soc_vec,
    sod_vec,
    soh_vec,
    sow,
    d_blocks,
    n_w_blocks,
    BD: tl.constexpr,
    BH: tl.constexpr,
    BW: tl.constexpr,
    KD: tl.constexpr,
    KH: tl.constexpr,
    KW: tl.constexpr,
    VEC: tl.constexpr,
    WIDE: tl.constexpr,
):
    sgn, sgc, sgd, sgh, sgw = grad_strides
    sin, sic, sid, sih, siw = idx_strides
    # Depth blocks of a plane are neighbours in launch order: they share output rows (read
    # once from DRAM) and write one contiguous range.
    plane = tl.program_id(0) // d_blocks
    d_block = tl.program_id(0) % d_blocks
    hw_block = tl.program_id(1)
    n = (plane // C).to(tl.int64)
    c = (plane % C).to(tl.int64)
    d = d_block * BD + tl.arange(0, BD)
    h_start = (hw_block // n_w_blocks) * BH
    w_start = (hw_block % n_w_blocks) * BW
    h = h_start + tl.arange(0, BH)
    w = w_start + tl.arange(0, BW)
    if WIDE:
        d = d.to(tl.int64)
        h = h.to(tl.int64)
        w = w.to(tl.int64)
    inside = (d < D)[:, None, None] & (h < H)[None, :, None] & (w < W_vec * VEC)[None, None, :]
    here = d[:, None, None] * HW + h[None, :, None] * W + w[None, None, :]
    grad_plane = grad_ptr + (n * sgn + c * sgc)
    idx_plane = idx_ptr + (n * sin + c * sic)

    # Disjoint windows, KH and KW powers of two dividing the tile: read each window's
    # argmax and gradient once, at output resolution, and repeat them over the window.
    BOH: tl.constexpr = BH // KH
    BOW: tl.constexpr = BW // KW
    od = (d // KD)[:, None, None]
    oh = (h_start // KH + tl.arange(0, BOH))[None, :, None]
    ow = (w_start // KW + tl.arange(0, BOW))[None, None, :]
    if WIDE:
        oh = oh.to(tl.int64)
        ow = ow.to(tl.int64)
    out_ok = (od < OD) & (oh < OH) & (ow < OW)
    chosen = tl.load(idx_plane + (od * sid + oh * sih + ow * siw), mask=out_ok, other=-1)
    g = tl.load(grad_plane + (od * sgd + oh * sgh + ow * sgw), mask=out_ok, other=0.0)
    shape5: tl.constexpr = (BD, BOH, KH, BOW, KW)
    chosen = tl.reshape(tl.broadcast_to(chosen[:, :, None, :, None], shape5), (BD, BH, BW))
    g = tl.reshape(tl.broadcast_to(g[:, :, None, :, None], shape5), (BD, BH, BW))
    result = tl.where(chosen.to(here.dtype) == here, g.to(tl.float32), 0.0)

    out_plane = gin_ptr + (n * son_vec + c * soc_vec) * VEC
    out_offs = (
        d[:, None, None] * (sod_vec * VEC)
        + h[None, :, None] * (soh_vec * VEC)
        + w[None, None, :] * sow
    )
    tl.store(out_plane + out_offs, result.to(gin_ptr.dtype.element_ty), mask=inside)


@dataclass(frozen=True)
class Config(Tile):
    """The override's tile (`Tiles`), for this kernel."""

    kernel: ClassVar[str] = NAME


def default(p: Backward, h: Heuristics) -> Config:
    """The override's tile for this gradient (its own `Tiles`, not `h`)."""
    return Config(**dataclasses.asdict(tile(*p.in_dhw, tiles())))


def windows(p: Backward, cfg: Tile) -> tuple[int, int, int] | None:
    """(KD, KH, KW) when every axis divides and KH, KW are powers of two within the tile."""
    found = dividing_windows(p.in_dhw, p.out_dhw)
    if found is None:
        return None
    _, kh, kw = found
    fit = all(k & (k - 1) == 0 and k <= b for k, b in ((kh, cfg.bh), (kw, cfg.bw)))
    return found if fit else None


def fits(p: Backward) -> bool:
    """Whether the default tile takes these windows."""
    return windows(p, tile(*p.in_dhw, tiles())) is not None


def plan(p: Backward, cfg: Config, h: Heuristics) -> Launch:
    """Launch of the expand kernel."""
    sides = windows(p, cfg)
    if sides is None:
        raise ValueError(f"the expand kernel needs 2^k H and W windows within the tile {cfg}")
    kd, kh, kw = sides
    constants = {"KD": kd, "KH": kh, "KW": kw}
    return launch(p, cfg, expand_kernel, vector_width(p.gin), constants)
