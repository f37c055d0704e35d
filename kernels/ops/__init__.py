"""Generic Triton operators, one per module; vendor versions live in kernels/backends/."""

from kernels.ops.adaptive_max_pool3d import adaptive_max_pool3d
from kernels.ops.adaptive_max_pool3d_backward import adaptive_max_pool3d_backward

__all__ = ["adaptive_max_pool3d", "adaptive_max_pool3d_backward"]
