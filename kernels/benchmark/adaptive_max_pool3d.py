"""Benchmark of adaptive_max_pool3d (forward) against `aten::adaptive_max_pool3d`."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from kernels.benchmark.bandwidth import forward_split
from kernels.benchmark.definition import (
    Case,
    KernelMismatch,
    OpBenchmark,
    Prepared,
    check_layout,
    describe_mismatch,
)

SEED = 20240611


def _window_bounds(
    n_in: int, n_out: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """Start (inclusive) and end (exclusive) of each adaptive window along one axis."""
    o = torch.arange(n_out, device=device, dtype=torch.int64)
    start = torch.div(o * n_in, n_out, rounding_mode="floor")
    end = torch.div((o + 1) * n_in + n_out - 1, n_out, rounding_mode="floor")
    return start, end


def verify_forward(
    x: torch.Tensor,
    output_size: tuple[int, int, int],
    got: tuple[torch.Tensor, torch.Tensor],
    want: tuple[torch.Tensor, torch.Tensor],
) -> None:
    """Values must equal the reference exactly; each index must lie in its window and point
    at the maximum (ties may pick another maximal element than PyTorch)."""
    out, idx = got
    ref_out, _ = want
    check_layout(out, ref_out, "output")
    if idx.shape != ref_out.shape or idx.dtype != torch.int64:
        raise KernelMismatch(
            f"indices: shape {tuple(idx.shape)} dtype {idx.dtype}, "
            f"want shape {tuple(ref_out.shape)} dtype torch.int64"
        )
    if not torch.equal(out, ref_out):
        raise KernelMismatch(describe_mismatch(out, ref_out, "output"))
    d_in, h_in, w_in = x.shape[-3:]
    volume = d_in * h_in * w_in
    if idx.numel() == 0:
        return
    lo, hi = int(idx.min()), int(idx.max())
    if lo < 0 or hi >= volume:
        raise KernelMismatch(f"indices: range [{lo}, {hi}] outside [0, {volume})")
    flat_idx = idx.reshape(*idx.shape[:-3], -1)
    picked = x.reshape(*x.shape[:-3], -1).gather(-1, flat_idx).reshape(idx.shape)
    if not torch.equal(picked, out):
        raise KernelMismatch(describe_mismatch(picked, out, "input at the returned indices"))
    coords = (idx // (h_in * w_in), (idx // w_in) % h_in, idx % w_in)
    axes = zip(coords, (d_in, h_in, w_in), output_size, strict=True)
    for axis, (coord, n_in, n_out) in enumerate(axes):
        start, end = _window_bounds(n_in, n_out, idx.device)
        shape = [1] * idx.dim()
        shape[idx.dim() - 3 + axis] = n_out
        outside = (coord < start.view(shape)) | (coord >= end.view(shape))
        if bool(outside.any()):
            raise KernelMismatch(
                f"indices: {int(outside.sum())} point outside their pooling window "
                f"along spatial axis {axis}"
            )


def prepare(case: Case, device: str, kernel_fn: Callable[..., Any]) -> Prepared:
    torch.manual_seed(SEED)
    x = torch.randn(case.size, dtype=case.torch_dtype, device=device)
    output_size = case.output_size
    aten = torch.ops.aten.adaptive_max_pool3d.default

    def reference() -> Any:
        return aten(x, list(output_size))

    def kernel() -> Any:
        return kernel_fn(x, output_size)

    def verify() -> None:
        verify_forward(x, output_size, kernel(), reference())

    out_numel = math.prod(case.size[:-3]) * math.prod(output_size)
    split = forward_split(x.numel(), out_numel, x.element_size())
    return Prepared(reference=reference, kernel=kernel, verify=verify, split=split)


BENCHMARK = OpBenchmark(name="adaptive_max_pool3d", prepare=prepare)
