"""Benchmark of adaptive_max_pool3d_backward against `aten::adaptive_max_pool3d_backward`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from kernels.benchmark.bandwidth import backward_split
from kernels.benchmark.definition import (
    Case,
    KernelMismatch,
    OpBenchmark,
    Prepared,
    check_layout,
    describe_mismatch,
)

SEED = 20240612

# Each input element sums at most ~8 window gradients here (two windows per axis overlap at
# most, for output sizes below the input's). Any order of summation in the element type is
# then within ERROR_TERMS·eps·Σ|terms| of the exact sum; a misplaced or missing gradient is off
# by the size of a term itself, far outside.
ERROR_TERMS = 8
FLOOR = 1e-6


def allowed_error(dtype: torch.dtype, abs_sum: torch.Tensor) -> torch.Tensor:
    """Per-element tolerance for a backward result in `dtype` given Σ|terms| at each element."""
    return ERROR_TERMS * torch.finfo(dtype).eps * abs_sum + FLOOR


def verify_backward(
    got: torch.Tensor, want: torch.Tensor, precise: torch.Tensor, abs_sum: torch.Tensor
) -> None:
    """`got` must have the reference's shape and dtype and lie within `allowed_error` of the
    reference computed in a wide type (`precise`); `abs_sum` is Σ|terms| per element."""
    check_layout(got, want, "grad_input")
    allowed = allowed_error(got.dtype, abs_sum)
    wide = got.to(precise.dtype)
    if not bool(((wide - precise).abs() <= allowed).all()):
        raise KernelMismatch(describe_mismatch(wide, precise, "grad_input", allowed))


def prepare(case: Case, device: str, kernel_fn: Callable[..., Any]) -> Prepared:
    torch.manual_seed(SEED)
    x = torch.randn(case.size, dtype=case.torch_dtype, device=device)
    output_size = list(case.output_size)
    out, indices = torch.ops.aten.adaptive_max_pool3d.default(x, output_size)
    grad = torch.randn(out.shape, dtype=out.dtype, device=device)
    del out
    aten = torch.ops.aten.adaptive_max_pool3d_backward.default

    def reference() -> Any:
        return aten(grad, x, indices)

    def kernel() -> Any:
        return kernel_fn(grad, x, indices)

    def verify() -> None:
        wide = torch.float64 if x.dtype == torch.float64 else torch.float32
        precise = aten(grad.to(wide), x.to(wide), indices)
        abs_sum = aten(grad.to(wide).abs(), x.to(wide), indices)
        verify_backward(kernel(), reference(), precise, abs_sum)

    split = backward_split(x.numel(), grad.numel(), x.element_size())
    return Prepared(reference=reference, kernel=kernel, verify=verify, split=split)


BENCHMARK = OpBenchmark(name="adaptive_max_pool3d_backward", prepare=prepare)
