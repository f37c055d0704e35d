"""adaptive_max_pool3d_backward: the generic Triton kernels, deterministic, one launch.

Each input element receives the sum of the gradients of the output windows that contain it
and chose it. Per axis the outputs covering input p are floor(p·O/I) ≤ o < ceil((p+1)·O/I),
at most `max_window(O, I)` of them, so every candidate loop is bounded at compile time. No
atomics and no second pass: fp32 accumulation (fp64 for fp64), a fixed order of additions,
the input's dtype stored.

The default plan picks, in order: the small-input kernel (`_backward_small.py`: every axis
divides and the input has at most 64 k elements: a lane per element, launch latency only);
the disjoint-window kernel (every axis divides, power-of-two
H and W windows: output tiles read once and repeated in registers, one vector store per
element); the fill-and-scatter kernel (`_backward_scatter.py`: any windows whose overlaps
leave an element at most 8 candidate outputs: zeros, then each gradient stored at its argmax);
the row kernel (steep upsampling: depth and row-group candidates as runtime loop bounds). On
the disjoint kernel the host passes strides divided by VEC so the compiler can prove 16-byte
alignment and vectorize the stores.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from kernels import runtime
from kernels.launch import Launch
from kernels.ops import _backward_scatter, _backward_small
from kernels.ops._adaptive import (
    PlanCache,
    as_5d,
    check_backward,
    covering_bounds,
    dividing_windows,
    fits_int32,
    max_window,
    next_pow2,
    signature,
    span,
    vector_width,
)
from kernels.ops._jit_helpers import unflatten4


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
    grad_strides,
    idx_strides,
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
    sgn, sgc, sgd, sgh, sgw = grad_strides
    sin, sic, sid, sih, siw = idx_strides
    pid = tl.program_id(0)
    plane, d, hb, wb = unflatten4(pid, D, n_h_blocks, n_w_blocks)
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


@triton.jit
def _rows_backward_kernel(
    grad_ptr,
    idx_ptr,
    gin_ptr,
    h_bounds_ptr,
    C,
    D,
    H,
    W,
    HW,
    OD,
    OW,
    grad_strides,
    idx_strides,
    son,
    soc,
    sod,
    soh,
    sow,
    n_h_blocks,
    n_w_blocks,
    ACC: tl.constexpr,
    BR: tl.constexpr,
    RG: tl.constexpr,
    BW: tl.constexpr,
    CW: tl.constexpr,
    KD: tl.constexpr,
    KW: tl.constexpr,
    WIDE: tl.constexpr,
    AXIS_WIDE: tl.constexpr,
):
    """Any window sizes: a program owns BR rows of BW elements of one depth slice.

    The depth is a scalar, so its candidate outputs are runtime loop bounds (one, two only
    where windows overlap) instead of masked iterations; rows go in groups of RG whose
    candidate output rows also bound a runtime loop, read from a per-row table (no division).
    Only W keeps a static loop of CW masked candidates, whose loads hit one or two cache
    lines per warp. fp32 accumulation in a fixed order, one store per element.
    """
    sgn, sgc, sgd, sgh, sgw = grad_strides
    sin, sic, sid, sih, siw = idx_strides
    pid = tl.program_id(0)
    plane, d, hb, wb = unflatten4(pid, D, n_h_blocks, n_w_blocks)
    n = (plane // C).to(tl.int64)
    c = (plane % C).to(tl.int64)
    od_first, od_last = _axis_range(d, D, OD, KD, AXIS_WIDE)

    w = wb * BW + tl.arange(0, BW)
    if WIDE:
        w = w.to(tl.int64)
    w_ok = w < W
    ow_first, ow_last = _axis_range(w, W, OW, KW, AXIS_WIDE)
    grad_plane = grad_ptr + (n * sgn + c * sgc)
    idx_plane = idx_ptr + (n * sin + c * sic)
    out_slice = gin_ptr + (n * son + c * soc + d.to(tl.int64) * sod)
    zero = d * 0
    if WIDE:
        zero = zero.to(tl.int64)
    for r in range(0, BR, RG):
        # A group of RG rows: their candidate output rows run from the first row's first to
        # the last row's last (bounds are monotonic in h); each row masks the others'.
        h = hb * BR + r + tl.arange(0, RG)
        rows = tl.minimum(h, H - 1)
        oh_first = tl.load(h_bounds_ptr + rows)
        oh_last = tl.load(h_bounds_ptr + H + rows)
        top = tl.minimum(hb * BR + r, H - 1)
        bottom = tl.minimum(hb * BR + r + RG - 1, H - 1)
        oh_lo = tl.load(h_bounds_ptr + top)
        oh_hi = tl.load(h_bounds_ptr + H + bottom)
        if WIDE:
            h = h.to(tl.int64)
        here = d.to(w.dtype) * HW + h[:, None] * W + w[None, :]
        inside = (h < H)[:, None] & w_ok[None, :]
        acc = tl.zeros([RG, BW], dtype=ACC)
        for od in range(od_first, od_last):
            for oh in range(oh_lo, oh_hi):
                row_ok = inside & ((oh >= oh_first) & (oh < oh_last))[:, None]
                # Loop counters are plain ints under the interpreter: widen by adding a zero.
                od_ = od + zero
                oh_ = oh + zero
                g_row = grad_plane + (od_ * sgd + oh_ * sgh)
                i_row = idx_plane + (od_ * sid + oh_ * sih)
                for k in tl.static_range(CW):
                    ow = ow_first + k
                    ok = row_ok & (ow < ow_last)[None, :]
                    i_offs = tl.broadcast_to((ow * siw)[None, :], (RG, BW))
                    g_offs = tl.broadcast_to((ow * sgw)[None, :], (RG, BW))
                    chosen = tl.load(i_row + i_offs, mask=ok, other=-1).to(here.dtype)
                    g = tl.load(g_row + g_offs, mask=ok, other=0.0)
                    acc += tl.where(chosen == here, g.to(ACC), 0.0)
        out_offs = h[:, None] * soh + w[None, :] * sow
        tl.store(out_slice + out_offs, acc.to(gin_ptr.dtype.element_ty), mask=inside)


def disjoint_windows(in_dhw: Sequence[int], out_dhw: Sequence[int]) -> tuple[int, int, int] | None:
    """(KD, KH, KW) when every axis divides and KH, KW are powers of two, else None."""
    windows = dividing_windows(in_dhw, out_dhw)
    if windows is None or any(k & (k - 1) for k in windows[1:]):
        return None
    return windows


@dataclass(frozen=True)
class BackwardConfig:
    """Which kernels a plan may take and their tiles (for tuning and tests; the default plan
    needs none). BH×BW is the row kernel's tile of one depth slice; `vector_stores` hints the
    disjoint kernel's stores 16-byte aligned."""

    bh: int
    bw: int
    num_warps: int
    vector_stores: bool = True
    disjoint: bool = True  # the disjoint-window kernel where every axis divides (2^k H, W)
    scatter: bool = True  # fill-and-scatter (or zeroed scatter) where the disjoint one does not
    scatter_first: bool = False  # ... or before it, everywhere it applies
    scatter_tile: int = 0  # elements (or outputs, when zeroed) per program; 0: the default
    zeroed: bool | None = None  # zero fill, then a lane per output (None: the plan decides)
    scatter_box: int = 0  # fill-and-scatter: outputs walked at a time; 0: the default
    small: bool = True  # a lane per element on small inputs whose axes all divide


def backward_config(d: int, h: int, w: int, tile: int | None = None) -> BackwardConfig:
    """About `tile` elements of one depth slice per row-kernel program, as wide along W as the
    row allows (more under the interpreter, where each program costs Python time)."""
    tile = tile or (32768 if runtime.interpreted else 4096)
    bw = min(next_pow2(w), 1024 if runtime.interpreted else 128)
    bh = min(next_pow2(h), max(1, tile // bw))
    return BackwardConfig(bh, bw, 1 if runtime.interpreted else max(1, min(8, bh * bw // 256)))


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


BackwardPlan = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
AnyLaunch = Launch | _backward_scatter.ZeroedLaunch


def plan_backward(
    grad_output: torch.Tensor,
    input: torch.Tensor,
    indices: torch.Tensor,
    config: BackwardConfig | None,
) -> BackwardPlan:
    """A launcher for tensors like these: plan(grad_output, indices) -> grad_input."""
    plan = plan_backward_with(
        grad_output, input, indices, lambda g, i, o: _plan_launch(g, i, o, config)
    )
    assert plan is not None  # _plan_launch always has a kernel
    return plan


def plan_backward_with(
    grad_output: torch.Tensor,
    input: torch.Tensor,
    indices: torch.Tensor,
    choose: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], AnyLaunch | None],
) -> BackwardPlan | None:
    """plan(grad_output, indices) -> grad_input around the launch `choose` picks for the 5-D
    views (grad, indices, a gradient like the input's); None where it picks none. Empty
    tensors need no launch. Shared by the vendor implementations."""
    shape, dtype, device = input.shape, input.dtype, input.device

    def new() -> torch.Tensor:
        return torch.empty(shape, dtype=dtype, device=device)

    if input.numel() == 0:
        return lambda grad, idx: new()
    if grad_output.numel() == 0:  # no window at all (an output size of 0): nothing flows back
        return lambda grad, idx: new().zero_()

    unbatched = input.dim() == 4
    launch = choose(as_5d(grad_output), as_5d(indices), as_5d(grad_input_like(input)))
    if launch is None:
        return None

    def run(grad: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        grad_input = new()
        if unbatched:
            launch(grad[None], idx[None], grad_input[None])
        else:
            launch(grad, idx, grad_input)
        return grad_input

    return run


def _plan_launch(
    grad5: torch.Tensor, idx5: torch.Tensor, gin5: torch.Tensor, config: BackwardConfig | None
) -> AnyLaunch:
    """The launch of the kernel that suits these 5-D tensors."""
    _, _, d, h, w = gin5.shape
    od, oh, ow = grad5.shape[2:]
    cfg = config or backward_config(d, h, w)
    scatter = cfg.scatter and _backward_scatter.applies((d, h, w), (od, oh, ow))
    if scatter and cfg.scatter_first:
        return _backward_scatter.plan_scatter(
            grad5, idx5, gin5, cfg.scatter_tile, cfg.zeroed, cfg.scatter_box
        )
    if cfg.disjoint and cfg.small and _backward_small.applies(gin5, grad5, idx5):
        return _backward_small.plan_small(grad5, idx5, gin5)
    windows = disjoint_windows((d, h, w), (od, oh, ow)) if cfg.disjoint else None
    if windows is not None:
        return _plan_disjoint(grad5, idx5, gin5, cfg, windows)
    if scatter:
        return _backward_scatter.plan_scatter(
            grad5, idx5, gin5, cfg.scatter_tile, cfg.zeroed, cfg.scatter_box
        )
    return _plan_rows(grad5, idx5, gin5, cfg)


def _plan_disjoint(
    grad5: torch.Tensor,
    idx5: torch.Tensor,
    gin5: torch.Tensor,
    cfg: BackwardConfig,
    windows: tuple[int, int, int],
) -> Launch:
    """Launch of the disjoint-window kernel: the tile is cfg's, rounded to whole windows."""
    n, c, d, h, w = gin5.shape
    _, oh, ow = grad5.shape[2:]
    kd, kh, kw = windows
    bow = max(1, min(next_pow2(ow), cfg.bw // kw))
    boh = max(1, min(next_pow2(oh), cfg.bh * cfg.bw // (bow * kw * kh)))
    blocks = (triton.cdiv(oh, boh), triton.cdiv(ow, bow))
    vec = vector_width(gin5) if cfg.vector_stores else 1
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
        grad5.stride(),
        idx5.stride(),
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
    return Launch(_disjoint_backward_kernel, grid, scalars, constants)


def row_bounds(in_size: int, out_size: int, device: torch.device) -> torch.Tensor:
    """First outputs covering each input position, then one past the last ones (int32)."""
    return torch.cat(covering_bounds(in_size, out_size)).to(device=device, dtype=torch.int32)


def _plan_rows(
    grad5: torch.Tensor, idx5: torch.Tensor, gin5: torch.Tensor, cfg: BackwardConfig
) -> Launch:
    """Launch of the row kernel: BR rows of BW elements of one depth slice per program."""
    n, c, d, h, w = gin5.shape
    od, oh, ow = grad5.shape[2:]
    bw = min(next_pow2(w), cfg.bw)
    # Groups of 4 rows keep several rows' loads in flight per warp (a single row per loop
    # iteration would wait on memory once per row); fewer when rows are short of windows.
    rg = min(4, next_pow2(h))
    # BR bounds a loop, not a block: whole groups up to the plane's rows, no masked tail.
    br = max(rg, min(triton.cdiv(h, rg) * rg, cfg.bh * cfg.bw // bw // rg * rg))
    blocks = (triton.cdiv(h, br), triton.cdiv(w, bw))
    reach = max(
        span(t.shape[2:], t.stride()[2:]) + bw * abs(t.stride(4)) for t in (grad5, idx5, gin5)
    )
    wide = not fits_int32(reach, (d + 1) * h * (w + bw))
    axis_wide = not fits_int32((d + 1) * od, (w + bw + 1) * ow)
    grid = (n * c * d * blocks[0] * blocks[1],)
    scalars = (
        row_bounds(h, oh, gin5.device),
        c,
        d,
        h,
        w,
        h * w,
        od,
        ow,
        grad5.stride(),
        idx5.stride(),
        *gin5.stride(),
        *blocks,
    )
    constants = {
        "ACC": tl.float64 if gin5.dtype == torch.float64 else tl.float32,
        "BR": br,
        "RG": rg,
        "BW": bw,
        "CW": max_window(ow, w),
        "KD": d // od if d % od == 0 else 0,
        "KW": w // ow if w % ow == 0 else 0,
        "WIDE": wide,
        "AXIS_WIDE": axis_wide,
        "num_warps": max(1, min(4, rg * bw // 256)),
    }
    return Launch(_rows_backward_kernel, grid, scalars, constants)
