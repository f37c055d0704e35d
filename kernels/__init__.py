"""The Triton kernel library: adaptive_max_pool3d forward and backward, with vendor dispatch.

`kernels.runtime` is imported first: on a machine without a GPU it sets TRITON_INTERPRET=1
before any `@triton.jit` function is defined, so the kernels run through Triton's
interpreter (Triton reads the variable when it decorates a kernel, so importing `triton`
earlier does no harm). The operators below call the active implementation (generic, or the
vendor's override); `use_kernels()` / `enable()` make PyTorch's own operators use them.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from kernels import runtime
from kernels.registration import disable, enable, enabled, use_kernels


def adaptive_max_pool3d(
    input: torch.Tensor, output_size: int | Sequence[int | None]
) -> tuple[torch.Tensor, torch.Tensor]:
    """Adaptive 3-D max pooling: (values, int64 flat D·H·W indices), as PyTorch computes them."""
    return runtime.function("adaptive_max_pool3d")(input, output_size)


def adaptive_max_pool3d_backward(
    grad_output: torch.Tensor, input: torch.Tensor, indices: torch.Tensor
) -> torch.Tensor:
    """Gradient of adaptive_max_pool3d with respect to its input (deterministic)."""
    return runtime.function("adaptive_max_pool3d_backward")(grad_output, input, indices)


__all__ = [
    "adaptive_max_pool3d",
    "adaptive_max_pool3d_backward",
    "disable",
    "enable",
    "enabled",
    "runtime",
    "use_kernels",
]
