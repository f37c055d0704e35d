"""adaptive_max_pool3d: the generic Triton kernel (values and int64 argmax indices).

One launch. Each program owns one (plane, output depth) pair and a tile of BOH×BOW outputs,
and reduces their windows in chunks of BKD×BKH×BKW input elements (power-of-two tile sides,
so splitting a lane number into window coordinates costs shifts, not divisions). The loops run
over the largest window of each axis, which the host computes, so they are bounded; lanes
outside an output's own window are masked and read nothing.

Semantics are PyTorch's: the index is the flat offset in the D·H·W volume, the first maximum
wins a tie (smallest offset, PyTorch scans d, h, w in order), and a NaN wins over any number
(the last NaN in scan order, as PyTorch's CPU kernel keeps it). Comparisons run in fp32
(fp64 for fp64 input), which is exact for every input dtype.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from kernels import runtime
from kernels.ops._adaptive import (
    as_5d,
    check_input,
    fits_int32,
    max_window,
    next_pow2,
    output_size3,
    span,
)


@triton.jit
def _adaptive_max_pool3d_kernel(
    x_ptr,
    out_ptr,
    idx_ptr,
    C,
    D,
    H,
    W,
    HW,
    OD,
    OH,
    OW,
    sxn,
    sxc,
    sxd,
    sxh,
    sxw,
    KD,
    KH,
    KW,
    n_oh_blocks,
    n_ow_blocks,
    ACC: tl.constexpr,
    BOH: tl.constexpr,
    BOW: tl.constexpr,
    BKD: tl.constexpr,
    BKH: tl.constexpr,
    BKW: tl.constexpr,
    WIDE: tl.constexpr,
):
    pid = tl.program_id(0)
    owb = pid % n_ow_blocks
    rest = pid // n_ow_blocks
    ohb = rest % n_oh_blocks
    rest = rest // n_oh_blocks
    od = rest % OD
    plane = rest // OD
    n = plane // C
    c = plane % C
    x_plane = x_ptr + (n.to(tl.int64) * sxn + c.to(tl.int64) * sxc)

    # Window coordinates in 32-bit unless an offset within a plane could pass 2^31 (WIDE).
    IDX: tl.constexpr = tl.int64 if WIDE else tl.int32
    BIG: tl.constexpr = 2**62 if WIDE else 2**31 - 1
    od64 = od.to(tl.int64)
    d_start = ((od64 * D) // OD).to(IDX)
    d_end = (((od64 + 1) * D + OD - 1) // OD).to(IDX)
    oh = ohb * BOH + tl.arange(0, BOH)
    ow = owb * BOW + tl.arange(0, BOW)
    oh64 = oh.to(tl.int64)
    ow64 = ow.to(tl.int64)
    h_start = ((oh64 * H) // OH).to(IDX)
    h_end = (((oh64 + 1) * H + OH - 1) // OH).to(IDX)
    w_start = ((ow64 * W) // OW).to(IDX)
    w_end = (((ow64 + 1) * W + OW - 1) // OW).to(IDX)
    live = (oh < OH)[:, None, None] & (ow < OW)[None, :, None]

    k = tl.arange(0, BKD * BKH * BKW)
    kd = (k // (BKH * BKW)).to(IDX)
    kh = ((k // BKW) % BKH).to(IDX)
    kw = (k % BKW).to(IDX)

    best = tl.full([BOH, BOW], float("-inf"), ACC)
    best_idx = tl.full([BOH, BOW], BIG, IDX)
    nan_idx = tl.full([BOH, BOW], -1, IDX)
    for d0 in range(0, KD, BKD):
        d = (d_start + d0 + kd)[None, None, :]
        d_ok = d < d_end
        for h0 in range(0, KH, BKH):
            h = h_start[:, None, None] + h0 + kh[None, None, :]
            h_ok = d_ok & (h < h_end[:, None, None])
            for w0 in range(0, KW, BKW):
                w = w_start[None, :, None] + w0 + kw[None, None, :]
                mask = live & h_ok & (w < w_end[None, :, None])
                offs = d * sxd + h * sxh + w * sxw
                v = tl.load(x_plane + offs, mask=mask, other=float("-inf")).to(ACC)
                flat = d * HW + h * W + w
                is_nan = v != v
                tile_nan = tl.max(tl.where(is_nan & mask, flat, -1), axis=2)
                clean = tl.where(is_nan, float("-inf"), v)
                tile_max = tl.max(clean, axis=2)
                hit = (clean == tile_max[:, :, None]) & mask
                tile_idx = tl.min(tl.where(hit, flat, BIG), axis=2)
                first = tl.where(tile_max == best, tl.minimum(best_idx, tile_idx), best_idx)
                best_idx = tl.where(tile_max > best, tile_idx, first)
                best = tl.maximum(best, tile_max)
                nan_idx = tl.maximum(nan_idx, tile_nan)

    has_nan = nan_idx >= 0
    value = tl.where(has_nan, float("nan"), best)
    index = tl.where(has_nan, nan_idx, best_idx).to(tl.int64)
    out_offs = (plane.to(tl.int64) * OD + od) * OH * OW + (oh[:, None] * OW + ow[None, :]).to(
        tl.int64
    )
    store_mask = (oh < OH)[:, None] & (ow < OW)[None, :]
    tl.store(out_ptr + out_offs, value.to(out_ptr.dtype.element_ty), mask=store_mask)
    tl.store(idx_ptr + out_offs, index, mask=store_mask)


@dataclass(frozen=True)
class ForwardConfig:
    """Tile sides of one launch: outputs per program (BOH×BOW) and window chunk (BKD×BKH×BKW)."""

    boh: int
    bow: int
    bkd: int
    bkh: int
    bkw: int
    num_warps: int


def forward_config(
    windows: tuple[int, int, int], out_hw: tuple[int, int], tile: int | None = None
) -> ForwardConfig:
    """Pick tile sides from the largest windows: a chunk of about `tile` elements per step."""
    tile = tile or (8192 if runtime.interpreted else 2048)
    kd, kh, kw = windows
    bkw = min(next_pow2(kw), 128)
    bkh = min(next_pow2(kh), max(1, tile // bkw))
    bkd = min(next_pow2(kd), max(1, tile // (bkw * bkh)))
    room = max(1, tile // (bkd * bkh * bkw))
    bow = min(next_pow2(out_hw[1]), room)
    boh = min(next_pow2(out_hw[0]), max(1, room // bow))
    elements = boh * bow * bkd * bkh * bkw
    num_warps = max(1, min(8, elements // 256))
    return ForwardConfig(boh, bow, bkd, bkh, bkw, num_warps)


def adaptive_max_pool3d(
    input: torch.Tensor,
    output_size: int | Sequence[int | None],
    *,
    config: ForwardConfig | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Adaptive 3-D max pooling of a 4-D (C,D,H,W) or 5-D (N,C,D,H,W) tensor of any strides.

    Returns (values, int64 indices), both contiguous, shaped like PyTorch's. `config` overrides
    the tile choice (for tuning only).
    """
    check_input(input)
    od, oh, ow = output_size3(output_size, input)
    x = as_5d(input)
    n, c, d, h, w = x.shape
    shape = (*input.shape[:-3], od, oh, ow)
    out = torch.empty(shape, dtype=input.dtype, device=input.device)
    indices = torch.empty(shape, dtype=torch.int64, device=input.device)
    if out.numel() == 0:
        return out, indices

    windows = (max_window(d, od), max_window(h, oh), max_window(w, ow))
    cfg = config or forward_config(windows, (oh, ow))
    n_oh_blocks = triton.cdiv(oh, cfg.boh)
    n_ow_blocks = triton.cdiv(ow, cfg.bow)
    # Masked lanes may point up to one chunk past a window: keep those offsets in range too.
    reach = span(x.shape[2:], x.stride()[2:]) + (
        cfg.bkd * x.stride(2) + cfg.bkh * x.stride(3) + cfg.bkw * x.stride(4)
    )
    wide = not fits_int32(reach, d * h * w + cfg.bkd * h * w)
    grid = (n * c * od * n_oh_blocks * n_ow_blocks,)
    _adaptive_max_pool3d_kernel[grid](
        x,
        out,
        indices,
        c,
        d,
        h,
        w,
        h * w,
        od,
        oh,
        ow,
        *x.stride(),
        *windows,
        n_oh_blocks,
        n_ow_blocks,
        ACC=tl.float64 if input.dtype == torch.float64 else tl.float32,
        BOH=cfg.boh,
        BOW=cfg.bow,
        BKD=cfg.bkd,
        BKH=cfg.bkh,
        BKW=cfg.bkw,
        WIDE=wide,
        num_warps=cfg.num_warps,
    )
    return out, indices
