"""The small_input kernel of adaptive_max_pool3d_backward: a lane per gradient element.

On inputs of a few thousand elements the launch is the cost: after the benchmark's L2 flush
the kernel's time is its launch, one trip to memory and whatever its code adds on the way.
Here every lane takes one element of the contiguous gradient, splits its flat number into
(n, c, d, h, w) by the plane's sizes, gathers its window's index and gradient (lanes of one
window read the same address) and stores the gradient where the index names it, zero
elsewhere: no exchange between lanes, no loop, one store.

The sizes and windows are compile-time constants, so the split is shifts and multiplies
fixed in the code instead of a chain of four runtime divisions before the loads can go out
(0.05–0.1 µs of a 4.5 µs launch on the H200). That is one compile per small input shape,
which Triton caches on disk. It needs every axis to divide (windows tile the input, one
output per element); larger inputs take the disjoint kernel, which reads each output once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import triton
import triton.language as tl

from kernels.heuristics import Heuristics
from kernels.launch import Launch
from kernels.ops._adaptive import Backward, dividing_windows, fits_int32, next_pow2, span

NAME = "small_input"


@triton.jit
def small_input_kernel(
    grad_ptr,
    idx_ptr,
    gin_ptr,
    total,
    grad_strides,
    idx_strides,
    C: tl.constexpr,
    D: tl.constexpr,
    H: tl.constexpr,
    W: tl.constexpr,
    KD: tl.constexpr,
    KH: tl.constexpr,
    KW: tl.constexpr,
    BLOCK: tl.constexpr,
):
    sgn, sgc, sgd, sgh, sgw = grad_strides
    sin, sic, sid, sih, siw = idx_strides
    e = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = e < total
    row = e // W
    w = e - row * W
    slice_ = row // H
    h = row - slice_ * H
    plane = slice_ // D
    d = slice_ - plane * D
    n = plane // C
    c = plane - n * C
    od = d // KD
    oh = h // KH
    ow = w // KW
    out = n * sin + c * sic + od * sid + oh * sih + ow * siw
    # A valid index's low word is the index: the volume fits in 32 bits here.
    chosen = tl.load(idx_ptr + out, mask=ok, other=-1).to(tl.int32)
    g = tl.load(grad_ptr + (n * sgn + c * sgc + od * sgd + oh * sgh + ow * sgw), mask=ok)
    here = (d * H + h) * W + w
    tl.store(gin_ptr + e, tl.where(chosen == here, g, 0.0), mask=ok)


@dataclass(frozen=True)
class Config:
    """Elements a program, one a lane; warps."""

    kernel: ClassVar[str] = NAME
    block: int
    num_warps: int


def fits(p: Backward) -> bool:
    """Contiguous gradient, every axis divides, all offsets fit in 32 bits."""
    if dividing_windows(p.in_dhw, p.out_dhw) is None:
        return False
    reach = max(span(t.shape, t.stride()) for t in (p.grad, p.idx))
    return p.gin.is_contiguous() and fits_int32(reach, p.gin.numel())


def default(p: Backward, h: Heuristics) -> Config:
    """`h.small_block` elements a program, four warps."""
    block = h.small_block
    if h.trim_blocks:
        block = min(block, next_pow2(p.gin.numel()))
    return Config(block, 4)


def plan(p: Backward, cfg: Config, h: Heuristics) -> Launch:
    """Launch of the small_input kernel."""
    if not fits(p):
        raise ValueError("the small_input kernel needs windows that tile a contiguous gradient")
    _, c, d, h_, w = p.gin.shape
    windows = dividing_windows((d, h_, w), p.out_dhw)
    assert windows is not None  # `fits`
    kd, kh, kw = windows
    total = p.gin.numel()
    scalars = (total, p.grad.stride(), p.idx.stride())
    constants = {
        "C": c,
        "D": d,
        "H": h_,
        "W": w,
        "KD": kd,
        "KH": kh,
        "KW": kw,
        "BLOCK": cfg.block,
        "num_warps": cfg.num_warps,
    }
    return Launch(small_input_kernel, (triton.cdiv(total, cfg.block),), scalars, constants)
