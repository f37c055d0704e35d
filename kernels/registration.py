"""Registration of the kernels as PyTorch's own `aten` operators for this process's device.

`enable()` registers `aten::adaptive_max_pool3d` and `aten::adaptive_max_pool3d_backward` for
the device's dispatch key (CUDA, PrivateUse1 for MUSA, CPU) through `torch.library`, so
`F.adaptive_max_pool3d(..., return_indices=True)` and autograd's backward run our kernels;
`disable()` restores PyTorch's kernels; `use_kernels()` does both around a block.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import torch

from kernels import runtime

_library: torch.library.Library | None = None


def _forward(input: torch.Tensor, output_size: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    return runtime.function("adaptive_max_pool3d")(input, list(output_size))


def _backward(
    grad_output: torch.Tensor, input: torch.Tensor, indices: torch.Tensor
) -> torch.Tensor:
    return runtime.function("adaptive_max_pool3d_backward")(grad_output, input, indices)


def enabled() -> bool:
    """Whether our kernels are registered now."""
    return _library is not None


def enable() -> None:
    """Register the kernels for this device's dispatch key (idempotent)."""
    global _library
    if _library is not None:
        return
    library = torch.library.Library("aten", "IMPL")
    key = runtime.dispatch_key()
    with warnings.catch_warnings():
        # PyTorch warns that a kernel it already has is being overridden: that is the point.
        warnings.simplefilter("ignore", UserWarning)
        library.impl("adaptive_max_pool3d", _forward, key)
        library.impl("adaptive_max_pool3d_backward", _backward, key)
    _library = library


def disable() -> None:
    """Undo `enable()`: PyTorch's own kernels run again (idempotent)."""
    global _library
    if _library is None:
        return
    library, _library = _library, None
    library._destroy()


@contextmanager
def use_kernels() -> Iterator[None]:
    """Run the block with our kernels registered; restore the previous state after it."""
    was_enabled = enabled()
    enable()
    try:
        yield
    finally:
        if not was_enabled:
            disable()
