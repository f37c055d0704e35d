"""The Triton kernel library: one function per operator of `kernels.registry`, with vendor dispatch.

`kernels.runtime` is imported first: on a machine without a GPU it sets TRITON_INTERPRET=1
before any `@triton.jit` function is defined, so the kernels run through Triton's
interpreter (Triton reads the variable when it decorates a kernel, so importing `triton`
earlier does no harm). Each operator here (`kernels.adaptive_max_pool3d`, ...) calls the
active implementation (generic, or the vendor's override); `use_kernels()` / `enable()` make
PyTorch's own operators use them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kernels import runtime
from kernels.registration import disable, enable, enabled, use_kernels
from kernels.registry import OPERATORS, Operator


def _export(op: Operator) -> Callable[..., Any]:
    """`kernels.<op>`: the active implementation of `op`, looked up at each call."""
    name = op.name

    def call(*args: Any, **kwargs: Any) -> Any:
        return runtime.function(name)(*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = op.doc
    return call


for _op in OPERATORS:
    globals()[_op.name] = _export(_op)
del _op

__all__ = [  # the operators' names are bound above, from the registry
    *(op.name for op in OPERATORS),
    "disable",
    "enable",
    "enabled",
    "runtime",
    "use_kernels",
]
