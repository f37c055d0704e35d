"""adaptive_max_pool3d_backward for Moore Threads (MUSA): deterministic, one launch, no atomics.

When every axis divides evenly with power-of-two H and W windows (the seed's fast path), the
windows tile the input disjointly: one launch on a 2-D grid ((plane, depth), block of H·W)
reads each window's argmax at output resolution, repeats it over the window in registers and
writes the gradient or zero with vector stores: no zero pass, no atomics. Every other shape
whose windows overlap boundedly takes the shared fill-and-scatter kernel
(`kernels/ops/_backward_scatter.py`: zeros, then each gradient stored once at its argmax,
overlaps summed in a fixed order), which needs no atomics either (MUSA has none for fp16 and
bf16); steep upsampling keeps this module's per-element gather with fp32 accumulation.

Falls back to the generic op for what it does not support: float64 (MUSA has none), devices
other than MUSA unless the mthreads vendor is forced (`kernels.runtime.force`), and grids
past the grid limits. When it runs it logs `KERNELS_MTHREADS ADAPTIVE_MAX_POOL3D_BACKWARD`
at debug level, so a run can prove the specialization was active.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import torch
import triton
import triton.language as tl

from kernels import runtime
from kernels.launch import Launch
from kernels.ops import _backward_scatter
from kernels.ops import adaptive_max_pool3d_backward as generic_backward
from kernels.ops._adaptive import (
    PlanCache,
    check_backward,
    fits_int32,
    max_window,
    next_pow2,
    signature,
    span,
    vector_width,
)
from kernels.ops.adaptive_max_pool3d_backward import AnyLaunch, plan_backward_with

logger = logging.getLogger(__name__)

SUPPORTED_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
_GRID_YZ_LIMIT = 65535
# Hinting 16-byte aligned stores vectorizes them; per-element gathers then spread over more
# memory sectors, so only the EXPAND path (output-resolution loads) takes the hint.


@triton.jit
def _mthreads_backward_kernel(
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
    EXPAND: tl.constexpr,
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

    if DIVISIBLE and EXPAND:
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
    elif DIVISIBLE:
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


def _tile(d: int, h: int, w: int) -> tuple[int, int, int, int]:
    """(BD, BH, BW, warps): one depth slice per program on a device, more under the interpreter."""
    if runtime.interpreted:
        bw = min(next_pow2(w), 1024)
        bh = min(next_pow2(h), max(1, 32768 // bw))
        return min(next_pow2(d), max(1, 32768 // (bw * bh))), bh, bw, 1
    bw = min(next_pow2(w), 128)
    bh = min(next_pow2(h), max(1, 4096 // bw))
    return 1, bh, bw, max(1, min(8, bh * bw // 256))


def supports(grad_output: torch.Tensor, input: torch.Tensor) -> bool:
    """Whether this kernel may run these tensors (else the generic op does)."""
    on_musa = input.device.type == "musa"
    return input.dtype in SUPPORTED_DTYPES and (on_musa or runtime.vendor() == "mthreads")


_PLANS = PlanCache()


def adaptive_max_pool3d_backward(
    grad_output: torch.Tensor, input: torch.Tensor, indices: torch.Tensor
) -> torch.Tensor:
    """Gradient of adaptive_max_pool3d with respect to its input (Moore Threads kernel)."""
    try:
        key: tuple[object, ...] | None = signature(grad_output, input, indices)
    except AttributeError:  # not tensors: the checks below say so
        key = None
    plan = _PLANS.get(key)
    if plan is None:
        check_backward(grad_output, input, indices)
        plan = _plan(grad_output, input, indices)
        _PLANS.put(key, plan)
    if plan is _FALLBACK or not supports(grad_output, input):
        return generic_backward(grad_output, input, indices)
    logger.debug("KERNELS_MTHREADS ADAPTIVE_MAX_POOL3D_BACKWARD")
    return plan(grad_output, indices)


def _fallback(grad: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    raise AssertionError("the generic op runs instead")  # never called: a marker


_FALLBACK: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = _fallback


def _plan(
    grad_output: torch.Tensor, input: torch.Tensor, indices: torch.Tensor
) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """A launcher for tensors like these, or _FALLBACK where the generic op must run."""
    return plan_backward_with(grad_output, input, indices, _launch) or _FALLBACK


def _launch(grad5: torch.Tensor, idx5: torch.Tensor, gin5: torch.Tensor) -> AnyLaunch | None:
    """This implementation's launch for these 5-D tensors, or None past the grid limits."""
    n, c, d, h, w = gin5.shape
    od, oh, ow = grad5.shape[2:]
    bd, bh, bw, num_warps = _tile(d, h, w)
    n_w_blocks = triton.cdiv(w, bw)
    blocks = triton.cdiv(h, bh) * n_w_blocks
    d_blocks = triton.cdiv(d, bd)
    if blocks > _GRID_YZ_LIMIT or n * c * d_blocks > 2**31 - 1:
        return None

    divisible = d % od == 0 and h % oh == 0 and w % ow == 0
    expand = divisible and all(
        k & (k - 1) == 0 and k <= b for k, b in ((h // oh, bh), (w // ow, bw))
    )
    if not expand and _backward_scatter.applies((d, h, w), (od, oh, ow)):
        # Windows that are not powers of two, or overlap: the shared scatter kernels (no
        # atomics, deterministic), much faster here than a per-element gather.
        return _backward_scatter.plan_scatter(grad5, idx5, gin5)
    vec = vector_width(gin5) if expand else 1
    reach = max(
        span(t.shape[2:], t.stride()[2:])
        + sum(b * abs(s) for b, s in zip((bd, bh, bw), t.stride()[2:], strict=True))
        for t in (grad5, idx5, gin5)
    )
    wide = not fits_int32(
        reach,
        (d + bd) * (h + bh) * (w + bw),
        (d + bd + 1) * od,
        (h + bh + 1) * oh,
        (w + bw + 1) * ow,
    )
    son, soc, sod, soh, sow = gin5.stride()
    scalars = (
        c,
        d,
        h,
        w,
        w // vec,
        h * w,
        od,
        oh,
        ow,
        grad5.stride(),
        idx5.stride(),
        son // vec,
        soc // vec,
        sod // vec,
        soh // vec,
        sow,
        d_blocks,
        n_w_blocks,
    )
    constants = {
        "BD": bd,
        "BH": bh,
        "BW": bw,
        "DIVISIBLE": divisible,
        # Expand windows from output resolution when KH, KW are powers of two within the tile.
        "EXPAND": expand,
        "KD": d // od if divisible else 1,
        "KH": h // oh if divisible else 1,
        "KW": w // ow if divisible else 1,
        "CD": max_window(od, d),
        "CH": max_window(oh, h),
        "CW": max_window(ow, w),
        "VEC": vec,
        "WIDE": wide,
        "num_warps": num_warps,
    }
    return Launch(_mthreads_backward_kernel, (n * c * d_blocks, blocks), scalars, constants)
