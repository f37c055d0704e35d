"""Index arithmetic the Triton kernels share (inlined where they call it)."""

from __future__ import annotations

import triton
import triton.language as tl  # noqa: F401  (the interpreter patches it in a jit function's module)


@triton.jit
def window(o, in_size, out_size):
    """Output `o`'s window along one axis: [floor(o·I/O), ceil((o+1)·I/O))."""
    return (o * in_size) // out_size, ((o + 1) * in_size + out_size - 1) // out_size


@triton.jit
def split_outputs(j, OD, OH, OW):
    """Flat output numbers of a contiguous (planes, OD, OH, OW) range -> (plane, od, oh, ow)."""
    ow = j % OW
    rest = j // OW
    oh = rest % OH
    rest = rest // OH
    return rest // OD, rest % OD, oh, ow
