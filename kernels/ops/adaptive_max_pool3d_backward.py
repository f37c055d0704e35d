"""adaptive_max_pool3d_backward: the generic Triton kernel, a deterministic gather.

Each input element sums the gradients of the output windows that contain it and chose it.
Per axis the outputs covering input p are floor(p·O/I) ≤ o < ceil((p+1)·O/I), at most
`max_window(O, I)` of them, so the candidate loops are bounded at compile time (one candidate
when I % O == 0, and then o = p // (I/O) with a constant divisor). No atomics, no zero fill,
no second pass: fp32 accumulation (fp64 for fp64), one store per element in the input's
dtype, the same order of additions on every run.

One launch; a program owns a BH×BW tile of one (plane, depth) slice. Stores are contiguous
along W and, where the strides allow it, the host passes them divided by VEC so the compiler
can prove 16-byte alignment and vectorize them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import triton
import triton.language as tl

from kernels import runtime
from kernels.ops._adaptive import (
    PlanCache,
    as_5d,
    check_backward,
    fits_int32,
    max_window,
    next_pow2,
    signature,
    span,
)


@triton.jit
def _axis_range(p, in_size, out_size, K: tl.constexpr, WIDE: tl.constexpr):
    """First output covering p and one past the last (K > 0: windows of K, one output)."""
    if K > 0:
        first = p // K
        last = first + 1
    elif WIDE:
        p64 = p.to(tl.int64)
        first = ((p64 * out_size) // in_size).to(p.dtype)
        last = (((p64 + 1) * out_size + in_size - 1) // in_size).to(p.dtype)
    else:
        first = (p * out_size) // in_size
        last = ((p + 1) * out_size + in_size - 1) // in_size
    return first, last


@triton.jit
def _adaptive_max_pool3d_backward_kernel(
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
    n_d_blocks,
    n_h_blocks,
    n_w_blocks,
    ACC: tl.constexpr,
    BD: tl.constexpr,
    BH: tl.constexpr,
    BW: tl.constexpr,
    CD: tl.constexpr,
    CH: tl.constexpr,
    CW: tl.constexpr,
    KD: tl.constexpr,
    KH: tl.constexpr,
    KW: tl.constexpr,
    VEC: tl.constexpr,
    WIDE: tl.constexpr,
    AXIS_WIDE: tl.constexpr,
):
    pid = tl.program_id(0)
    wb = pid % n_w_blocks
    rest = pid // n_w_blocks
    hb = rest % n_h_blocks
    rest = rest // n_h_blocks
    db = rest % n_d_blocks
    plane = rest // n_d_blocks
    n = (plane // C).to(tl.int64)
    c = (plane % C).to(tl.int64)

    d = db * BD + tl.arange(0, BD)
    h = hb * BH + tl.arange(0, BH)
    w = wb * BW + tl.arange(0, BW)
    if WIDE:
        d = d.to(tl.int64)
        h = h.to(tl.int64)
        w = w.to(tl.int64)
    inside = (d < D)[:, None, None] & (h < H)[None, :, None] & (w < W_vec * VEC)[None, None, :]
    od_first, od_last = _axis_range(d, D, OD, KD, AXIS_WIDE)
    oh_first, oh_last = _axis_range(h, H, OH, KH, AXIS_WIDE)
    ow_first, ow_last = _axis_range(w, W, OW, KW, AXIS_WIDE)
    # Flat index of each element in the D·H·W volume, compared with the stored argmax (in
    # 32 bits unless the volume passes 2^31: the low word of a valid index is the index).
    here = d[:, None, None] * HW + h[None, :, None] * W + w[None, None, :]

    grad_plane = grad_ptr + (n * sgn + c * sgc)
    idx_plane = idx_ptr + (n * sin + c * sic)
    acc = tl.zeros([BD, BH, BW], dtype=ACC)
    for i in range(CD):
        od = od_first + i
        d_ok = inside & (od < od_last)[:, None, None]
        for j in range(CH):
            oh = oh_first + j
            h_ok = d_ok & (oh < oh_last)[None, :, None]
            for k in range(CW):
                ow = ow_first + k
                ok = h_ok & (ow < ow_last)[None, None, :]
                idx_offs = (
                    od[:, None, None] * sid + oh[None, :, None] * sih + ow[None, None, :] * siw
                )
                chosen = tl.load(idx_plane + idx_offs, mask=ok, other=-1).to(here.dtype)
                g_offs = od[:, None, None] * sgd + oh[None, :, None] * sgh + ow[None, None, :] * sgw
                # Loaded alongside the index, not after it: one memory round trip, not two.
                g = tl.load(grad_plane + g_offs, mask=ok, other=0.0)
                acc += tl.where(chosen == here, g.to(ACC), 0.0)

    out_plane = gin_ptr + (n * son_vec + c * soc_vec) * VEC
    out_offs = (
        d[:, None, None] * (sod_vec * VEC)
        + h[None, :, None] * (soh_vec * VEC)
        + w[None, None, :] * sow
    )
    tl.store(out_plane + out_offs, acc.to(gin_ptr.dtype.element_ty), mask=inside)


@triton.jit
def _disjoint_backward_kernel(
    grad_ptr,
    idx_ptr,
    gin_ptr,
    C,
    D,
    H,
    W,
    W_vec,
    HW,
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
    n_h_blocks,
    n_w_blocks,
    BOH: tl.constexpr,
    BOW: tl.constexpr,
    KD: tl.constexpr,
    KH: tl.constexpr,
    KW: tl.constexpr,
    VEC: tl.constexpr,
    WIDE: tl.constexpr,
):
    """Every axis divides and KH, KW are powers of two: windows tile the input disjointly.

    A program reads a BOH×BOW tile of outputs once (coalesced, no duplicate gathers), repeats
    each value over its KH×KW window in registers, and writes the (BOH·KH)×(BOW·KW) input
    tile of one depth slice.
    """
    pid = tl.program_id(0)
    wb = pid % n_w_blocks
    rest = pid // n_w_blocks
    hb = rest % n_h_blocks
    rest = rest // n_h_blocks
    d = rest % D
    plane = rest // D
    n = (plane // C).to(tl.int64)
    c = (plane % C).to(tl.int64)
    od = (d // KD).to(tl.int64)

    oh = hb * BOH + tl.arange(0, BOH)
    ow = wb * BOW + tl.arange(0, BOW)
    if WIDE:
        oh = oh.to(tl.int64)
        ow = ow.to(tl.int64)
    out_ok = (oh < OH)[:, None] & (ow < OW)[None, :]
    idx_offs = oh[:, None] * sih + ow[None, :] * siw
    chosen = tl.load(idx_ptr + (n * sin + c * sic + od * sid) + idx_offs, mask=out_ok, other=-1)
    g_offs = oh[:, None] * sgh + ow[None, :] * sgw
    g = tl.load(grad_ptr + (n * sgn + c * sgc + od * sgd) + g_offs, mask=out_ok, other=0.0)

    BH: tl.constexpr = BOH * KH
    BW: tl.constexpr = BOW * KW
    h = hb * BH + tl.arange(0, BH)
    w = wb * BW + tl.arange(0, BW)
    if WIDE:
        h = h.to(tl.int64)
        w = w.to(tl.int64)
    # Flat index of each element, compared with its window's argmax (32-bit unless WIDE).
    here = d.to(h.dtype) * HW + h[:, None] * W + w[None, :]
    chosen = tl.reshape(tl.broadcast_to(chosen[:, None, :, None], (BOH, KH, BOW, KW)), (BH, BW))
    g = tl.reshape(tl.broadcast_to(g[:, None, :, None], (BOH, KH, BOW, KW)), (BH, BW))
    value = tl.where(chosen.to(here.dtype) == here, g, 0.0)
    inside = (h < H)[:, None] & (w < W_vec * VEC)[None, :]
    out_plane = gin_ptr + (n * son_vec + c * soc_vec + d.to(tl.int64) * sod_vec) * VEC
    out_offs = h[:, None] * (soh_vec * VEC) + w[None, :] * sow
    tl.store(out_plane + out_offs, value.to(gin_ptr.dtype.element_ty), mask=inside)


def disjoint_windows(in_dhw: Sequence[int], out_dhw: Sequence[int]) -> tuple[int, int, int] | None:
    """(KD, KH, KW) when every axis divides and KH, KW are powers of two, else None."""
    if any(o == 0 or i % o for i, o in zip(in_dhw, out_dhw, strict=True)):
        return None
    kd, kh, kw = (i // o for i, o in zip(in_dhw, out_dhw, strict=True))
    if kh & (kh - 1) or kw & (kw - 1):
        return None
    return kd, kh, kw


@dataclass(frozen=True)
class BackwardConfig:
    """Tile of one program (BD×BH×BW elements of one plane), its warps, and whether stores
    are hinted 16-byte aligned (vectorized; gathers then spread over more memory sectors)."""

    bd: int
    bh: int
    bw: int
    num_warps: int
    vector_stores: bool = True  # the disjoint kernel's stores; the gather kernel's only if asked
    disjoint: bool = True  # use the disjoint-window kernel where it applies


def backward_config(d: int, h: int, w: int, tile: int | None = None) -> BackwardConfig:
    """About `tile` elements per program, as wide along W as the row allows.

    On a GPU a program owns one depth slice (BD = 1); under the interpreter, where each
    program costs Python time whatever its size, a program takes as much of the plane as fits.
    """
    if runtime.interpreted:
        tile = tile or 32768
        bw = min(next_pow2(w), 1024)
        bh = min(next_pow2(h), max(1, tile // bw))
        bd = min(next_pow2(d), max(1, tile // (bw * bh)))
        return BackwardConfig(bd, bh, bw, 1)
    tile = tile or 4096  # H200 sweep: 4096 beat 1024/2048/8192 on most rows (docs/performance.md)
    bw = min(next_pow2(w), 128)
    bh = min(next_pow2(h), max(1, tile // bw))
    return BackwardConfig(1, bh, bw, max(1, min(8, bh * bw // 256)))


def store_vector(strides: tuple[int, ...], w: int, element_size: int) -> int:
    """Largest power-of-two run of 16 bytes or less that every row start is aligned to."""
    if strides[-1] != 1:
        return 1
    vec = max(1, 16 // element_size)
    while vec > 1 and any(s % vec for s in (*strides[:-1], w)):
        vec //= 2
    return vec


def grad_input_like(input: torch.Tensor) -> torch.Tensor:
    """An uninitialized gradient buffer laid out as PyTorch's own: contiguous, whatever the
    input's memory format (ATen's meta function allocates it so, channels_last_3d included)."""
    return torch.empty(input.shape, dtype=input.dtype, device=input.device)


_PLANS = PlanCache()


def adaptive_max_pool3d_backward(
    grad_output: torch.Tensor,
    input: torch.Tensor,
    indices: torch.Tensor,
    *,
    config: BackwardConfig | None = None,
) -> torch.Tensor:
    """Gradient of adaptive_max_pool3d with respect to its input, deterministic.

    `indices` are the forward's flat D·H·W offsets; any strides of `grad_output` and `indices`
    work. `config` overrides the tile choice (for tuning only).
    """
    try:
        key: tuple[object, ...] | None = (signature(grad_output, input, indices), config)
    except AttributeError:  # not tensors: the checks below say so
        key = None
    plan = _PLANS.get(key)
    if plan is None:
        check_backward(grad_output, input, indices)
        plan = plan_backward(grad_output, input, indices, config)
        _PLANS.put(key, plan)
    return plan(grad_output, indices)


def plan_backward(
    grad_output: torch.Tensor,
    input: torch.Tensor,
    indices: torch.Tensor,
    config: BackwardConfig | None,
) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """A launcher for tensors like these: plan(grad_output, indices) -> grad_input."""
    shape, dtype, device = input.shape, input.dtype, input.device

    def new() -> torch.Tensor:
        return torch.empty(shape, dtype=dtype, device=device)

    if input.numel() == 0:
        return lambda grad, idx: new()
    if grad_output.numel() == 0:  # no window at all (an output size of 0): nothing flows back
        return lambda grad, idx: new().zero_()

    unbatched = input.dim() == 4
    grad5, idx5, gin5 = as_5d(grad_output), as_5d(indices), as_5d(grad_input_like(input))
    launch, scalars, constants = _plan_launch(grad5, idx5, gin5, config)

    def run(grad: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        grad_input = new()
        if unbatched:
            launch(grad[None], idx[None], grad_input[None], *scalars, **constants)
        else:
            launch(grad, idx, grad_input, *scalars, **constants)
        return grad_input

    return run


def _plan_launch(
    grad5: torch.Tensor, idx5: torch.Tensor, gin5: torch.Tensor, config: BackwardConfig | None
) -> tuple[Callable[..., Any], tuple[int, ...], dict[str, Any]]:
    """The kernel launcher, its scalar arguments and its constants for these 5-D tensors."""
    n, c, d, h, w = gin5.shape
    od, oh, ow = grad5.shape[2:]
    cfg = config or backward_config(d, h, w)
    # The default tiling takes the disjoint kernel wherever it applies (one depth slice per
    # program, so BD plays no part); an explicit config only when it asks for BD = 1.
    applies = config is None or (cfg.bd == 1 and cfg.disjoint)
    windows = disjoint_windows((d, h, w), (od, oh, ow)) if applies else None
    if windows is not None:
        return _plan_disjoint(grad5, idx5, gin5, cfg, windows)
    blocks = (triton.cdiv(d, cfg.bd), triton.cdiv(h, cfg.bh), triton.cdiv(w, cfg.bw))
    # A store-vector hint makes each thread own VEC neighbours, which spreads the gathers over
    # more memory sectors; the gather kernel takes it only when a config asks for it.
    hinted = config is not None and cfg.vector_stores
    vec = store_vector(gin5.stride(), w, gin5.element_size()) if hinted else 1
    tile = (cfg.bd, cfg.bh, cfg.bw)
    reach = max(
        span(t.shape[2:], t.stride()[2:])
        + sum(b * abs(s) for b, s in zip(tile, t.stride()[2:], strict=True))
        for t in (grad5, idx5, gin5)
    )
    wide = not fits_int32(reach, (d + cfg.bd) * (h + cfg.bh) * (w + cfg.bw))
    axis_wide = not fits_int32((d + cfg.bd + 1) * od, (h + cfg.bh + 1) * oh, (w + cfg.bw + 1) * ow)
    son, soc, sod, soh, sow = gin5.stride()
    grid = (n * c * blocks[0] * blocks[1] * blocks[2],)
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
        *grad5.stride(),
        *idx5.stride(),
        son // vec,
        soc // vec,
        sod // vec,
        soh // vec,
        sow,
        *blocks,
    )
    constants = {
        "ACC": tl.float64 if gin5.dtype == torch.float64 else tl.float32,
        "BD": cfg.bd,
        "BH": cfg.bh,
        "BW": cfg.bw,
        "CD": max_window(od, d),
        "CH": max_window(oh, h),
        "CW": max_window(ow, w),
        "KD": d // od if d % od == 0 else 0,
        "KH": h // oh if h % oh == 0 else 0,
        "KW": w // ow if w % ow == 0 else 0,
        "VEC": vec,
        "WIDE": wide,
        "AXIS_WIDE": axis_wide,
        "num_warps": cfg.num_warps,
    }
    return _adaptive_max_pool3d_backward_kernel[grid], scalars, constants


def _plan_disjoint(
    grad5: torch.Tensor,
    idx5: torch.Tensor,
    gin5: torch.Tensor,
    cfg: BackwardConfig,
    windows: tuple[int, int, int],
) -> tuple[Callable[..., Any], tuple[int, ...], dict[str, Any]]:
    """Launch of the disjoint-window kernel: the tile is cfg's, rounded to whole windows."""
    n, c, d, h, w = gin5.shape
    _, oh, ow = grad5.shape[2:]
    kd, kh, kw = windows
    bow = max(1, min(next_pow2(ow), cfg.bw // kw))
    boh = max(1, min(next_pow2(oh), cfg.bh * cfg.bw // (bow * kw * kh)))
    blocks = (triton.cdiv(oh, boh), triton.cdiv(ow, bow))
    vec = store_vector(gin5.stride(), w, gin5.element_size()) if cfg.vector_stores else 1
    reach = max(
        span(t.shape[2:], t.stride()[2:])
        + boh * kh * abs(t.stride(3))
        + bow * kw * abs(t.stride(4))
        for t in (grad5, idx5, gin5)
    )
    wide = not fits_int32(reach, (d + 1) * (h + boh * kh) * (w + bow * kw))
    son, soc, sod, soh, sow = gin5.stride()
    grid = (n * c * d * blocks[0] * blocks[1],)
    scalars = (
        c,
        d,
        h,
        w,
        w // vec,
        h * w,
        oh,
        ow,
        *grad5.stride(),
        *idx5.stride(),
        son // vec,
        soc // vec,
        sod // vec,
        soh // vec,
        sow,
        *blocks,
    )
    constants = {
        "BOH": boh,
        "BOW": bow,
        "KD": kd,
        "KH": kh,
        "KW": kw,
        "VEC": vec,
        "WIDE": wide,
        "num_warps": cfg.num_warps,
    }
    return _disjoint_backward_kernel[grid], scalars, constants
