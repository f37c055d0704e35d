"""Generic Triton operators, one module (or package) each, named as the operator.

Each holds the operator's public function (`kernels.ops.<op>.<op>`, what `kernels.registry`
names) and, for an operator with several kernels, its ordered dispatch table and one module
per kernel. Vendor versions live in kernels/backends/. Import an operator through `kernels`
(`kernels.<op>`, the active implementation) or `kernels.runtime.function`.
"""

from kernels import runtime  # first: it sets up Triton's interpreter before any kernel exists

__all__ = ["runtime"]
