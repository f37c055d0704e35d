"""The small-input kernel of adaptive_max_pool3d_backward: a lane per gradient element.

On inputs of a few thousand elements the launch is the cost: after the benchmark's L2 flush
the kernel's time is its launch, one trip to memory and whatever its code adds on the way
(tens of instructions for each runtime division, a shared-memory exchange to repeat loaded
outputs over their windows). Here every lane takes one element of the contiguous gradient,
splits its flat number by multiply-high and shift (magic numbers from the host), gathers its
window's index and gradient (lanes of one window read the same address) and stores the
gradient where the index names it, zero elsewhere: no division, no exchange, no loop.
Taken where every axis divides (windows tile the input, one output per element) and the
input is small; larger inputs take the disjoint-window kernel, which reads each output once.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.launch import Launch
from kernels.ops._adaptive import divisor, fits_int32, span
from kernels.ops._jit_helpers import div_by

# Inputs up to this many elements take this kernel (the benchmark's tiny sizes have 512 to
# 32768); above it, the disjoint kernel's coalesced output reads matter more than latency.
SMALL_INPUT = 65536
BLOCK = 128  # one element a thread: the shortest code path


@triton.jit
def _small_backward_kernel(
    grad_ptr,
    idx_ptr,
    gin_ptr,
    total,
    C,
    c_magic,
    c_shift,
    D,
    d_magic,
    d_shift,
    H,
    h_magic,
    h_shift,
    W,
    w_magic,
    w_shift,
    sgn,
    sgc,
    sgd,
    sgh,
    sgw,
    sin,
    sic,
    sid,
    sih,
    siw,
    KD: tl.constexpr,
    KH: tl.constexpr,
    KW: tl.constexpr,
    BLOCK: tl.constexpr,
):
    e = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = e < total
    row = div_by(e, (W, w_magic, w_shift), False)
    w = e - row * W
    slice_ = div_by(row, (H, h_magic, h_shift), False)
    h = row - slice_ * H
    plane = div_by(slice_, (D, d_magic, d_shift), False)
    d = slice_ - plane * D
    n = div_by(plane, (C, c_magic, c_shift), False)
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


def applies(gin5: torch.Tensor, grad5: torch.Tensor, idx5: torch.Tensor) -> bool:
    """Small, contiguous gradient; every axis divides; all offsets fit in 32 bits."""
    in_dhw, out_dhw = gin5.shape[2:], grad5.shape[2:]
    if any(o == 0 or i % o for i, o in zip(in_dhw, out_dhw, strict=True)):
        return False
    reach = max(span(t.shape, t.stride()) for t in (grad5, idx5))
    return gin5.is_contiguous() and gin5.numel() <= SMALL_INPUT and fits_int32(reach)


def plan_small(grad5: torch.Tensor, idx5: torch.Tensor, gin5: torch.Tensor) -> Launch:
    """Launch of the small-input kernel for 5-D tensors that `applies` accepts."""
    _, c, d, h, w = gin5.shape
    od, oh, ow = grad5.shape[2:]
    total = gin5.numel()
    scalars = (
        total,
        *(number for value in (c, d, h, w) for number in (value, *divisor(value))),
        *grad5.stride(),
        *idx5.stride(),
    )
    constants = {"KD": d // od, "KH": h // oh, "KW": w // ow, "BLOCK": BLOCK, "num_warps": 4}
    return Launch(_small_backward_kernel, (triton.cdiv(total, BLOCK),), scalars, constants)
