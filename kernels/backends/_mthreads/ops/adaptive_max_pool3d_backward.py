"""adaptive_max_pool3d_backward for Moore Threads (MUSA): the seed's two paths, deterministic.

When every axis divides evenly (I % O == 0) the windows tile the input disjointly, so each
input element belongs to exactly one window: one launch on a 3-D grid (plane, depth, block
of H·W) reads that window's argmax in closed form (o = p // K with constant K) and writes the
gradient or zero, with no zero pass, no atomics and coalesced stores. Otherwise windows
overlap; MUSA has no fp16/bf16 atomics, so instead of the seed's scatter each element gathers
from its bounded set of candidate windows with fp32 accumulation, deterministically.

Falls back to the generic op for what it does not support: float64 (MUSA has none), devices
other than MUSA unless the mthreads vendor is forced (`kernels.runtime.force`), and grids
past the 3-D grid limits. When it runs it logs `KERNELS_MTHREADS ADAPTIVE_MAX_POOL3D_BACKWARD`
at debug level, so a run can prove the specialization was active.
"""

from __future__ import annotations

import logging

import torch
import triton
import triton.language as tl

from kernels import runtime
from kernels.ops import adaptive_max_pool3d_backward as generic_backward
from kernels.ops._adaptive import as_5d, check_backward, fits_int32, max_window, next_pow2, span
from kernels.ops.adaptive_max_pool3d_backward import grad_input_like, store_vector

logger = logging.getLogger(__name__)

SUPPORTED_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
_GRID_YZ_LIMIT = 65535


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
    son_vec,
    soc_vec,
    sod_vec,
    soh_vec,
    sow,
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
    plane = tl.program_id(0)
    d_block = tl.program_id(1)
    hw_block = tl.program_id(2)
    n = (plane // C).to(tl.int64)
    c = (plane % C).to(tl.int64)
    d = d_block * BD + tl.arange(0, BD)
    h = (hw_block // n_w_blocks) * BH + tl.arange(0, BH)
    w = (hw_block % n_w_blocks) * BW + tl.arange(0, BW)
    if WIDE:
        d = d.to(tl.int64)
        h = h.to(tl.int64)
        w = w.to(tl.int64)
    inside = (d < D)[:, None, None] & (h < H)[None, :, None] & (w < W_vec * VEC)[None, None, :]
    here = (d[:, None, None] * HW + h[None, :, None] * W + w[None, None, :]).to(tl.int64)
    grad_plane = grad_ptr + (n * sgn + c * sgc)
    idx_plane = idx_ptr + (n * sin + c * sic)

    if DIVISIBLE:
        # Disjoint windows: the single window holding (d, h, w) is (d//KD, h//KH, w//KW).
        od = (d // KD)[:, None, None]
        oh = (h // KH)[None, :, None]
        ow = (w // KW)[None, None, :]
        chosen = tl.load(idx_plane + (od * sid + oh * sih + ow * siw), mask=inside, other=-1)
        hit = inside & (chosen == here)
        g = tl.load(grad_plane + (od * sgd + oh * sgh + ow * sgw), mask=hit, other=0.0)
        result = g.to(tl.float32)
    else:
        # Overlapping windows: gather every candidate window in a fixed order, fp32 sum.
        d64 = d.to(tl.int64)
        h64 = h.to(tl.int64)
        w64 = w.to(tl.int64)
        od_first = ((d64 * OD) // D).to(d.dtype)
        od_last = (((d64 + 1) * OD + D - 1) // D).to(d.dtype)
        oh_first = ((h64 * OH) // H).to(h.dtype)
        oh_last = (((h64 + 1) * OH + H - 1) // H).to(h.dtype)
        ow_first = ((w64 * OW) // W).to(w.dtype)
        ow_last = (((w64 + 1) * OW + W - 1) // W).to(w.dtype)
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
                    hit = ok & (chosen == here)
                    g = tl.load(grad_plane + (od * sgd + oh * sgh + ow * sgw), mask=hit, other=0.0)
                    result += g.to(tl.float32)

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
    bh = min(next_pow2(h), max(1, 2048 // bw))
    return 1, bh, bw, max(1, min(8, bh * bw // 256))


def supports(grad_output: torch.Tensor, input: torch.Tensor) -> bool:
    """Whether this kernel may run these tensors (else the generic op does)."""
    on_musa = input.device.type == "musa"
    return input.dtype in SUPPORTED_DTYPES and (on_musa or runtime.vendor() == "mthreads")


def adaptive_max_pool3d_backward(
    grad_output: torch.Tensor, input: torch.Tensor, indices: torch.Tensor
) -> torch.Tensor:
    """Gradient of adaptive_max_pool3d with respect to its input (Moore Threads kernel)."""
    check_backward(grad_output, input, indices)
    if not supports(grad_output, input):
        return generic_backward(grad_output, input, indices)
    grad_input = grad_input_like(input)
    if grad_input.numel() == 0:
        return grad_input
    if grad_output.numel() == 0:
        return grad_input.zero_()
    grad5, idx5, gin5 = as_5d(grad_output), as_5d(indices), as_5d(grad_input)
    n, c, d, h, w = gin5.shape
    od, oh, ow = grad5.shape[2:]
    bd, bh, bw, num_warps = _tile(d, h, w)
    n_w_blocks = triton.cdiv(w, bw)
    blocks = triton.cdiv(h, bh) * n_w_blocks
    d_blocks = triton.cdiv(d, bd)
    if d_blocks > _GRID_YZ_LIMIT or blocks > _GRID_YZ_LIMIT or n * c > 2**31 - 1:
        return generic_backward(grad_output, input, indices)

    logger.debug("KERNELS_MTHREADS ADAPTIVE_MAX_POOL3D_BACKWARD")
    divisible = d % od == 0 and h % oh == 0 and w % ow == 0
    vec = store_vector(gin5.stride(), w, gin5.element_size())
    reach = max(
        span(t.shape[2:], t.stride()[2:])
        + sum(b * abs(s) for b, s in zip((bd, bh, bw), t.stride()[2:], strict=True))
        for t in (grad5, idx5, gin5)
    )
    wide = not fits_int32(reach, (d + bd) * (h + bh) * (w + bw))
    son, soc, sod, soh, sow = gin5.stride()
    _mthreads_backward_kernel[(n * c, d_blocks, blocks)](
        grad5,
        idx5,
        gin5,
        c,
        d,
        h,
        w,
        w // vec,
        h * w,
        od,
        oh,
        ow,
        *grad5.stride(),
        *idx5.stride(),
        son // vec,
        soc // vec,
        sod // vec,
        soh // vec,
        sow,
        n_w_blocks,
        BD=bd,
        BH=bh,
        BW=bw,
        DIVISIBLE=divisible,
        KD=d // od if divisible else 1,
        KH=h // oh if divisible else 1,
        KW=w // ow if divisible else 1,
        CD=max_window(od, d),
        CH=max_window(oh, h),
        CW=max_window(ow, w),
        VEC=vec,
        WIDE=wide,
        num_warps=num_warps,
    )
    return grad_input
