"""The small-input kernel of adaptive_max_pool3d_backward: a lane per gradient element.

On inputs of a few thousand elements the launch is the cost: after the benchmark's L2 flush
the kernel's time is its launch, one trip to memory and whatever its code adds on the way.
Here every lane takes one element of the contiguous gradient, splits its flat number into
(n, c, d, h, w) by the plane's sizes, gathers its window's index and gradient (lanes of one
window read the same address) and stores the gradient where the index names it, zero
elsewhere: no exchange between lanes, no loop, one store.

The sizes and windows are compile-time constants, so the split is shifts and multiplies
fixed in the code instead of a chain of four runtime divisions before the loads can go out:
0.05–0.1 µs of a 4.5 µs launch on the H200 (docs/performance.md, v10). That is one compile
per small input shape, which Triton caches on disk. Taken where every axis divides (windows
tile the input, one output per element) and the input is small; larger inputs take the
disjoint-window kernel, which reads each output once.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.launch import Launch
from kernels.ops._adaptive import dividing_windows, fits_int32, span

# Inputs up to this many elements take this kernel (the benchmark's tiny sizes have 512 to
# 32768); above it, the disjoint kernel's coalesced output reads matter more than latency.
SMALL_INPUT = 65536
BLOCK = 512  # four elements a thread: 0–0.1 µs ahead of one a thread (H200 sweep, v10)


@triton.jit
def _small_backward_kernel(
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


def applies(gin5: torch.Tensor, grad5: torch.Tensor, idx5: torch.Tensor) -> bool:
    """Small, contiguous gradient; every axis divides; all offsets fit in 32 bits."""
    if dividing_windows(gin5.shape[2:], grad5.shape[2:]) is None:
        return False
    reach = max(span(t.shape, t.stride()) for t in (grad5, idx5))
    return gin5.is_contiguous() and gin5.numel() <= SMALL_INPUT and fits_int32(reach)


def plan_small(grad5: torch.Tensor, idx5: torch.Tensor, gin5: torch.Tensor) -> Launch:
    """Launch of the small-input kernel for 5-D tensors that `applies` accepts."""
    _, c, d, h, w = gin5.shape
    windows = dividing_windows((d, h, w), grad5.shape[2:])
    assert windows is not None, "plan_small needs windows that tile the input (`applies`)"
    kd, kh, kw = windows
    total = gin5.numel()
    scalars = (total, grad5.stride(), idx5.stride())
    constants = {
        "C": c,
        "D": d,
        "H": h,
        "W": w,
        "KD": kd,
        "KH": kh,
        "KW": kw,
        "BLOCK": BLOCK,
        "num_warps": 4,
    }
    return Launch(_small_backward_kernel, (triton.cdiv(total, BLOCK),), scalars, constants)
