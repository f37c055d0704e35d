"""Registration of the kernels as PyTorch's own `aten` operators for this process's device.

`enable()` registers, for every registry operator that names an `aten` operator, our function
for the device's dispatch key (CUDA, PrivateUse1 for MUSA, CPU) through `torch.library`, so
`F.adaptive_max_pool3d(..., return_indices=True)` and autograd's backward run our kernels;
`disable()` restores PyTorch's kernels; `use_kernels()` does both around a block. Each call
goes through `runtime.function`, so the active vendor's override runs.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

from kernels import registry, runtime

_library: torch.library.Library | None = None


def _dispatcher(name: str) -> Callable[..., Any]:
    """A kernel for torch.library that calls operator `name`'s active implementation."""

    def call(*args: Any) -> Any:
        return runtime.function(name)(*args)

    call.__name__ = call.__qualname__ = name
    return call


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
        for op in registry.OPERATORS:
            if op.aten is not None:
                library.impl(op.aten, _dispatcher(op.name), key)
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
