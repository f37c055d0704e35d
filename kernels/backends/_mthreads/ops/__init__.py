"""Moore Threads operators; `kernels.runtime` uses each in place of the generic one."""

from kernels.backends._mthreads.ops.adaptive_max_pool3d_backward import (
    adaptive_max_pool3d_backward,
)

__all__ = ["adaptive_max_pool3d_backward"]
