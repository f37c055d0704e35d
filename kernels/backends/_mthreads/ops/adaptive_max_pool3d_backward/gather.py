"""The gather kernel of the Moore Threads backward: each element gathers its candidate
windows (steep upsampling, where an element has more candidate outputs than the scatters
take).

A program owns BD depth slices × BH rows × BW columns of the gradient; each element walks its
CD×CH×CW candidate outputs in a fixed order and sums the gradients of those that chose it in
fp32: no atomics (MUSA has none for fp16 and bf16), deterministic. Where every axis divides
(one window an element) it reads that window's index and gradient directly.
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
from kernels.ops._adaptive import Backward, dividing_windows

NAME = "gather"


@triton.jit
def gather_kernel(
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
    DIVISIBLE: tl.constexpr,
    KD: tl.constexpr,
    KH: tl.constexpr,
    KW: tl.constexpr,
    CD: tl.constexpr,
    CH: tl.constexpr,
    CW: tl.constexpr,
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

    if DIVISIBLE:
        # Disjoint windows: the single window holding (d, h, w) is (d//KD, h//KH, w//KW).
        od = (d // KD)[:, None, None]
        oh = (h // KH)[None, :, None]
        ow = (w // KW)[None, None, :]
        chosen = tl.load(idx_plane + (od * sid + oh * sih + ow * siw), mask=inside, other=-1)
        g = tl.load(grad_plane + (od * sgd + oh * sgh + ow * sgw), mask=inside, other=0.0)
        result = tl.where(chosen.to(here.dtype) == here, g.to(tl.float32), 0.0)
    else:
        # Overlapping windows: gather every candidate window in a fixed order, fp32 sum.
        # In 32 bits unless p·O could pass 2^31 (WIDE): a 64-bit division costs far more.
        od_first = (d * OD) // D
        od_last = ((d + 1) * OD + D - 1) // D
        oh_first = (h * OH) // H
        oh_last = ((h + 1) * OH + H - 1) // H
        ow_first = (w * OW) // W
        ow_last = ((w + 1) * OW + W - 1) // W
        result = tl.zeros([BD, BH, BW], dtype=tl.float32)
        for i in range(CD):
            od = (od_first + i)[:, None, None]
            d_ok = inside & (od < od_last[:, None, None])
            for j in range(CH):
                oh = (oh_first + j)[None, :, None]
                h_ok = d_ok & (oh < oh_last[None, :, None])
                for k in range(CW):
                    ow = (ow_first + k)[None, None, :]
                    ok = h_ok & (ow < ow_last[None, None, :])
                    chosen = tl.load(
                        idx_plane + (od * sid + oh * sih + ow * siw), mask=ok, other=-1
                    )
                    g = tl.load(grad_plane + (od * sgd + oh * sgh + ow * sgw), mask=ok, other=0.0)
                    result += tl.where(chosen.to(here.dtype) == here, g.to(tl.float32), 0.0)

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


def plan(p: Backward, cfg: Config, h: Heuristics) -> Launch:
    """Launch of the gather kernel."""
    windows = dividing_windows(p.in_dhw, p.out_dhw)
    cd, ch, cw = p.candidates
    kd, kh, kw = windows or (1, 1, 1)
    constants = {
        "DIVISIBLE": windows is not None,
        "KD": kd,
        "KH": kh,
        "KW": kw,
        "CD": cd,
        "CH": ch,
        "CW": cw,
    }
    return launch(p, cfg, gather_kernel, 1, constants)
